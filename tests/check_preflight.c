/*
 * Unit tests of what bloomguard -t decides without a server: which
 * permanent replication slot a configuration's daemon uses (the name -t
 * --connect checks on the server and --drop-slot drops, read without ever
 * making one), and the offline findings' one-line form and count.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "check_util.h"
#include "config.h"
#include "follow.h"
#include "preflight.h"

static struct config cfg;
static struct filter_config fc;
static char *dir;

static void setup(void)
{
    check_filter_fixture(&cfg, &fc, "users", 0.01, 1000);
    dir = check_tmpdir("check_preflight");
    cfg.slot_name = "auto";
    cfg.snapshot_path = dir;
    cfg.conninfo = "";
    cfg.admin_token_file = "";
    cfg.tls_cert_file = "";
    cfg.tls_key_file = "";
    cfg.replication_token_file = "";
    cfg.upstream_token_file = "";
    cfg.upstream = "";
    cfg.publish_dir = "";
    cfg.listen_host = "127.0.0.1";
    cfg.listen_group = "";
}

static void teardown(void)
{
    check_rm_rf(dir);
    free(dir);
}

static void keep(const char *content)
{
    char *path = check_join(dir, "logical-slot");
    FILE *fp = fopen(path, "w");
    ck_assert_ptr_nonnull(fp);
    fputs(content, fp);
    fclose(fp);
    free(path);
}

START_TEST(named_slot_is_known)
{
    char name[64] = "";
    cfg.slot_name = "bg_fleet_1";
    ck_assert(follow_logical_known_slot(&cfg, name, sizeof name));
    ck_assert_str_eq(name, "bg_fleet_1");
}
END_TEST

START_TEST(auto_without_file_is_unknown_and_makes_none)
{
    char name[64] = "x";
    ck_assert(!follow_logical_known_slot(&cfg, name, sizeof name));
    char *path = check_join(dir, "logical-slot");
    FILE *fp = fopen(path, "r");
    ck_assert_ptr_null(fp);         /* -t must not write the name a start would */
    free(path);
}
END_TEST

START_TEST(auto_reads_the_kept_name)
{
    char name[64] = "";
    keep("bloomguard_0123abcd4567\n");
    ck_assert(follow_logical_known_slot(&cfg, name, sizeof name));
    ck_assert_str_eq(name, "bloomguard_0123abcd4567");
}
END_TEST

START_TEST(auto_refuses_a_name_it_could_not_have_written)
{
    char name[64] = "";
    keep("Other-Slot\n");
    ck_assert(!follow_logical_known_slot(&cfg, name, sizeof name));
    keep("bloomguard_x; DROP\n");
    ck_assert(!follow_logical_known_slot(&cfg, name, sizeof name));
}
END_TEST

START_TEST(auto_without_snapshots_is_a_temporary_slot)
{
    char name[64] = "";
    keep("bloomguard_0123abcd4567\n");
    cfg.snapshot_path = "";
    ck_assert(!follow_logical_known_slot(&cfg, name, sizeof name));
}
END_TEST

START_TEST(offline_findings_are_one_line_each)
{
    char *buf = NULL;
    size_t len = 0;
    char *missing = check_join(dir, "no/such");
    cfg.snapshot_path = missing;
    cfg.conninfo = "prot=1";
    FILE *out = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(out);
    unsigned errors = preflight_offline(&cfg, NULL, out);
    fclose(out);
    ck_assert_uint_eq(errors, 2);
    unsigned lines = 0;
    for (char *p = buf; *p != '\0'; p++)
        lines += *p == '\n';
    ck_assert_uint_eq(lines, 2);
    ck_assert_ptr_nonnull(strstr(buf, "bloomguard: error: [postgres] conninfo: "));
    ck_assert_ptr_nonnull(strstr(buf, "bloomguard: error: [snapshot] path: "));
    ck_assert_ptr_nonnull(strstr(buf, missing));
    free(buf);
    free(missing);
}
END_TEST

CHECK_SUITE("preflight",
    CHECK_CASE("slot", .setup = setup, .teardown = teardown),
    CHECK_TEST(named_slot_is_known),
    CHECK_TEST(auto_without_file_is_unknown_and_makes_none),
    CHECK_TEST(auto_reads_the_kept_name),
    CHECK_TEST(auto_refuses_a_name_it_could_not_have_written),
    CHECK_TEST(auto_without_snapshots_is_a_temporary_slot),
    CHECK_TEST(offline_findings_are_one_line_each),
)
