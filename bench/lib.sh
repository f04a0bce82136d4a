# The start of every benchmark of bench/ (source it right after `set -euo
# pipefail`; do not run it): BG_TOP, the shell library (scripts/lib/common.sh
# and scripts/lib/bench.sh, which holds the helpers), byte-wise strings, and
# log lines named after the script unless it set BG_SCRIPT first.
BG_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${BG_SCRIPT:=$(basename "$0")}"
# shellcheck source=scripts/lib/common.sh
. "$BG_TOP/scripts/lib/common.sh"
# shellcheck source=scripts/lib/bench.sh
. "$BG_TOP/scripts/lib/bench.sh"
export LC_ALL=C
