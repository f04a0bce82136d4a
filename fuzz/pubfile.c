/*
 * Fuzz the reader of published filters (src/publish/reader.c, through
 * libbloomguard's API) with any bytes as the file at its path: a damaged
 * file, or one a faulty daemon wrote.  It must never crash or read past
 * the file, open only a file whose header pubfmt_check accepts, READY and
 * not SUPERSEDED, never answer "absent" from a SATURATED one, and never
 * answer "absent" for an ID GET /exists would refuse: those are
 * BLOOMGUARD_INVALID by the header's max_id_bytes.
 *
 * The input is written to a file in a directory of this process's own
 * (made once, removed at exit) and opened by its path, as a reader does.
 * The seeds are a daemon's file of three layers (its boot id zeroed, which
 * readers take as any boot's) and variations of its header.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bloomguard.h"
#include "fuzz.h"
#include "pubfmt.h"

static char dir[64], path[96];

static void remove_dir(void)
{
    unlink(path);
    rmdir(dir);
}

FUZZ_TARGET(pubfile)
{
    if (dir[0] == '\0') {
        snprintf(dir, sizeof dir, "/tmp/bg-fuzz-pubfile.XXXXXX");
        FUZZ_CHECK(mkdtemp(dir) != NULL);
        snprintf(path, sizeof path, "%s/f.bgf", dir);
        atexit(remove_dir);
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(write(fd, data, size) == (ssize_t)size);
    close(fd);
    int err = -1;
    bloomguard *bg = bloomguard_open(path, 0, &err);
    if (bg == NULL) {
        FUZZ_CHECK(err != BLOOMGUARD_OK && strcmp(bloomguard_strerror(err), "unknown error") != 0);
        return 0;
    }
    /* Opened: a header this build reads, complete and current. */
    FUZZ_CHECK(size >= PUBFMT_HEADER_BYTES);
    static struct pubfmt_header h;
    memcpy(&h, data, sizeof h);
    char why[128];
    FUZZ_CHECK(pubfmt_check(&h, size, why, sizeof why));
    uint32_t flags = atomic_load(&h.flags);
    FUZZ_CHECK((flags & PUBFMT_READY) && !(flags & PUBFMT_SUPERSEDED));
    /* What GET /exists refuses is invalid, whatever the bits say. */
    size_t over = (size_t)h.max_id_bytes + 1;
    char *big = malloc(over);
    FUZZ_CHECK(big != NULL);
    memset(big, '7', over);
    FUZZ_CHECK(bloomguard_lookup(bg, big, over) == BLOOMGUARD_INVALID);
    FUZZ_CHECK(bloomguard_lookup(bg, big, over - 1) != BLOOMGUARD_INVALID);
    free(big);
    FUZZ_CHECK(bloomguard_lookup(bg, "", 0) == BLOOMGUARD_INVALID);
    FUZZ_CHECK(bloomguard_lookup(bg, "a\0b", 3) == BLOOMGUARD_INVALID);
    static const char *const ids[] = { "1", "7", "399", "0007", "users", "\xc3\xbc" };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        enum bloomguard_answer a = bloomguard_lookup(bg, ids[i], strlen(ids[i]));
        FUZZ_CHECK(a >= BLOOMGUARD_NOT_READY && a <= BLOOMGUARD_INVALID);
        FUZZ_CHECK(!(flags & PUBFMT_UNSURE) || a != BLOOMGUARD_ABSENT);
    }
    struct bloomguard_info in;
    FUZZ_CHECK(bloomguard_info(bg, &in) == in.error);
    bloomguard_close(bg);
    return 0;
}
