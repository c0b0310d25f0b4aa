/* flags_test.c - flag parsing: every kind, errors, pass-through.
 * bazel test //lib/core:flags_test */
#include <stdio.h>
#include <string.h>

#include "lib/core/flags.h"
#include "lib/core/status.h"
#include "lib/core/testing.h"

static const char *const colors[] = {"red", "green", NULL};

/* Parses "--NAME=VALUE" against one flag; the status, the message kept. */
static int parse_one(const tb_flag *f, const char *arg, char *msg, size_t cap)
{
    char *av[] = {"prog", (char *)arg, NULL};
    int argc = 2, help = 0;
    int rc = tb_flags_parse(f, 1, &argc, av, NULL, &help);
    snprintf(msg, cap, "%s", tb_error_message());
    tb_error_clear();
    return rc;
}

/* Ranges, NaN and infinity, values past what the type holds: each refused
 * with the flag, the value and what it expects, the old value kept. */
static void check_ranges(void)
{
    int threads = 7;
    long long seed = 3;
    double lr = 0.5, mom = 0.25, wd = TB_FLAG_UNSET;
    size_t bucket = 1;
    tb_flag fl[] = {
        {"threads", TB_FLAG_INT, &threads, "t", NULL, TB_RANGE(0, 4096)},
        {"seed", TB_FLAG_LONG, &seed, "s", NULL, TB_RANGE_MIN(0)},
        {"lr", TB_FLAG_DOUBLE, &lr, "lr", NULL, TB_RANGE_ABOVE(0)},
        {"momentum", TB_FLAG_DOUBLE, &mom, "m", NULL, TB_RANGE_HALF_OPEN(0, 1)},
        {"wd", TB_FLAG_DOUBLE_AUTO, &wd, "wd", NULL, TB_RANGE_MIN(0)},
        {"bucket-size", TB_FLAG_SIZE, &bucket, "b", NULL, TB_RANGE(1, 1024.0 * 1024 * 1024)},
        {"free", TB_FLAG_DOUBLE, &lr, "no range", NULL},
    };
    static const struct {
        int flag;
        const char *arg, *want;
    } bad[] = {
        {0, "--threads=100000", "--threads=100000: out of range (expected an integer in 0..4096)"},
        {0, "--threads=-1", "expected an integer in 0..4096"},
        {0, "--threads=99999999999", "--threads=99999999999: out of range"},
        {1, "--seed=-5", "--seed=-5: out of range (expected an integer >= 0)"},
        {1, "--seed=99999999999999999999", "out of range"},
        {2, "--lr=nan", "--lr=nan: not a finite number (expected a finite number > 0)"},
        {2, "--lr=inf", "--lr=inf: not a finite number"},
        {2, "--lr=-1e30", "--lr=-1e30: out of range (expected a finite number > 0)"},
        {2, "--lr=0", "out of range"},
        {2, "--lr=1e999", "not a finite number"},
        {3, "--momentum=nan", "not a finite number (expected a finite number in [0, 1))"},
        {3, "--momentum=1", "--momentum=1: out of range"},
        {4, "--wd=-1", "--wd=-1: out of range (expected auto or a finite number >= 0)"},
        {4, "--wd=nan", "not a finite number"},
        {5, "--bucket-size=1e300", "--bucket-size=1e300: too large for a size"},
        {5, "--bucket-size=16E", "not a size"},
        {5, "--bucket-size=17179869184G", "too large for a size"},
        {5, "--bucket-size=2G", "out of range (expected a size like 512M or 2G in 1..1G)"},
        {5, "--bucket-size=0", "out of range"},
        {5, "--bucket-size=-1M", "cannot be negative"},
        {5, "--bucket-size=infG", "not a finite size"},
        {6, "--free=-inf", "--free=-inf: not a finite number (expected a finite number)"},
    };
    char msg[512];
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int rc = parse_one(&fl[bad[k].flag], bad[k].arg, msg, sizeof msg);
        CHECK(rc == TB_ERR_INVALID && strstr(msg, bad[k].want), "%s: rc %d, message '%s'",
              bad[k].arg, rc, msg);
    }
    CHECK(threads == 7 && seed == 3 && lr == 0.5 && mom == 0.25 && tb_flag_unset(wd) &&
              bucket == 1, "refused values leave the old ones");
    CHECK(parse_one(&fl[0], "--threads=4096", msg, sizeof msg) == TB_OK && threads == 4096,
          "the top of a closed range");
    CHECK(parse_one(&fl[3], "--momentum=0", msg, sizeof msg) == TB_OK && mom == 0,
          "the bottom of a half-open range");
    CHECK(parse_one(&fl[4], "--wd=0.01", msg, sizeof msg) == TB_OK && wd == 0.01, "wd 0.01");
    char val[32];
    tb_flag_value_str(&fl[4], val, sizeof val);
    CHECK(!strcmp(val, "0.01"), "wd shows as %s", val);
    CHECK(parse_one(&fl[4], "--wd=auto", msg, sizeof msg) == TB_OK && tb_flag_unset(wd),
          "--wd=auto unsets");
    tb_flag_value_str(&fl[4], val, sizeof val);
    CHECK(!strcmp(val, "auto"), "unset shows as %s", val);
    CHECK(parse_one(&fl[5], "--bucket-size=1G", msg, sizeof msg) == TB_OK &&
              bucket == 1024u * 1024 * 1024, "1G at the top of its range");
    CHECK(parse_one(&fl[6], "--free=-1e300", msg, sizeof msg) == TB_OK && lr == -1e300,
          "no range: any finite value");
    char buf[2048];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    tb_flags_usage(f, "prog", "ranges", fl, 2);
    fclose(f);
    CHECK(strstr(buf, "[4096]; an integer in 0..4096") && strstr(buf, "[3]; an integer >= 0"),
          "--help shows each range:\n%s", buf);
}

int main(void)
{
    int b = 0, i = 5, color = 0, help = 0;
    long long l = 0;
    double d = 1.5;
    const char *s = "x";
    size_t sz = 0;
    tb_flag flags[] = {
        {"pin", TB_FLAG_BOOL, &b, "pin", NULL},
        {"workers", TB_FLAG_INT, &i, "w", NULL},
        {"steps", TB_FLAG_LONG, &l, "s", NULL},
        {"lr", TB_FLAG_DOUBLE, &d, "lr", NULL},
        {"out-dir", TB_FLAG_STRING, &s, "dir", NULL},
        {"mem-limit", TB_FLAG_SIZE, &sz, "m", NULL},
        {"color", TB_FLAG_CHOICE, &color, "c", colors},
    };
    size_t n = sizeof flags / sizeof flags[0];
    char *argv1[] = {"prog", "--pin", "--workers=3", "--steps", "12", "--lr=0.25", "pos",
                     "--out-dir=/tmp/x", "--mem-limit=2G", "--color=green",
                     "--benchmark_filter=abc", NULL};
    int argc = 11;
    CHECK(tb_flags_parse(flags, n, &argc, argv1, "benchmark_", &help) == TB_OK, "parse");
    CHECK(b == 1 && i == 3 && l == 12 && d == 0.25 && !strcmp(s, "/tmp/x"), "values");
    CHECK(sz == 2ull << 30, "size %zu", sz);
    CHECK(color == 1, "choice");
    CHECK(argc == 3 && !strcmp(argv1[1], "pos") && !strcmp(argv1[2], "--benchmark_filter=abc"),
          "left over argc %d", argc);
    CHECK(!help, "no help");

    char *argv2[] = {"prog", "--no-pin", "--help", NULL};
    argc = 3;
    CHECK(tb_flags_parse(flags, n, &argc, argv2, NULL, &help) == TB_OK && b == 0 && help,
          "--no-pin and --help");

    char *bad[][3] = {
        {"prog", "--wokers=2", NULL}, {"prog", "--workers=two", NULL},
        {"prog", "--color=blue", NULL}, {"prog", "--mem-limit=lots", NULL},
        {"prog", "--workers", NULL}, {"prog", "--pin=maybe", NULL},
    };
    const char *want[] = {"unknown flag '--wokers=2'", "--workers", "one of red green",
                          "size", "needs a value", "true or false"};
    for (int k = 0; k < 6; k++) {
        argc = 2;
        int rc = tb_flags_parse(flags, n, &argc, bad[k], NULL, &help);
        CHECK(rc == TB_ERR_INVALID, "case %d refused", k);
        CHECK(strstr(tb_error_message(), want[k]) != NULL, "case %d message: %s", k,
              tb_error_message());
        tb_error_clear();
    }
    /* a flag given twice is refused, naming both (a list flag's second value
     * silently replaced the first: --skip=a --skip=b); --pin and --no-pin too */
    char *twice[][5] = {{"prog", "--out-dir=a", "pos", "--out-dir", "b"},
                        {"prog", "--pin", "--no-pin", NULL, NULL}};
    const char *want_twice[] = {"flag --out-dir given twice ('--out-dir=a', then '--out-dir')",
                                "flag --pin given twice ('--pin', then '--no-pin')"};
    for (int k = 0; k < 2; k++) {
        argc = twice[k][3] ? 5 : 3;
        CHECK(tb_flags_parse(flags, n, &argc, twice[k], NULL, &help) == TB_ERR_INVALID &&
                  strstr(tb_error_message(), want_twice[k]),
              "twice %d: %s", k, tb_error_message());
        tb_error_clear();
    }
    /* the command line kept as given, cut to what fits, NULL-terminated */
    char *line[] = {"prog", "--pin", "pos", NULL}, *kept[3];
    CHECK(tb_flags_keep_argv(3, line, kept, 3) == 2 && kept[0] == line[0] && kept[1] == line[1] &&
              kept[2] == NULL,
          "two of three kept in room for two");
    /* a boolean that may be left to "auto" (--conv-bias): every spelling */
    int tri = TB_FLAG_AUTO;
    tb_flag tf[] = {{"bias", TB_FLAG_BOOL_AUTO, &tri, "bias", NULL}};
    char val[16];
    tb_flag_value_str(&tf[0], val, sizeof val);
    CHECK(!strcmp(val, "auto"), "auto default shows as %s", val);
    const char *spell[] = {"--bias", "--no-bias", "--bias=auto", "--bias=false", "--bias=true"};
    const int want_tri[] = {1, 0, TB_FLAG_AUTO, 0, 1};
    for (int k = 0; k < 5; k++) {
        char *av[] = {"prog", (char *)spell[k], NULL};
        argc = 2;
        tri = k % 2 ? 1 : TB_FLAG_AUTO;
        CHECK(tb_flags_parse(tf, 1, &argc, av, NULL, &help) == TB_OK && tri == want_tri[k],
              "%s gives %d", spell[k], tri);
    }
    tb_flag_value_str(&tf[0], val, sizeof val);
    CHECK(!strcmp(val, "true"), "true shows as %s", val);
    char *av_bad[] = {"prog", "--bias=maybe", NULL};
    argc = 2;
    CHECK(tb_flags_parse(tf, 1, &argc, av_bad, NULL, &help) == TB_ERR_INVALID &&
              strstr(tb_error_message(), "true, false or auto"),
          "--bias=maybe: %s", tb_error_message());
    tb_error_clear();

    check_ranges();

    char buf[4096];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    tb_flags_usage(f, "prog", "does things", flags, n);
    fclose(f);
    CHECK(strstr(buf, "--workers") && strstr(buf, "one of red green"), "usage lists flags");
    printf("%s\n", failures ? "FAILED" : "all flags checks passed");
    return failures != 0;
}
