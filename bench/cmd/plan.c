/* plan.c - see plan.h. Test: bazel test //bench:plan_test */
#include "bench/cmd/plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/core/json.h"
#include "lib/core/status.h"

/* A running `bin --describe`: its pid and the read end of its stdout. */
typedef struct describing {
    pid_t pid;
    int fd;
} describing;

static int start_describe(const char *bin, describing *d)
{
    int fd[2];
    if (pipe(fd) != 0)
        return TB_FAIL(TB_ERR_IO, "pipe failed: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return TB_FAIL(TB_ERR_IO, "fork failed: %s", strerror(errno));
    }
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        char *args[] = {(char *)bin, "--describe", NULL};
        execv(bin, args);
        _exit(127);
    }
    close(fd[1]);
    d->pid = pid;
    d->fd = fd[0];
    return TB_OK;
}

/* Its whole stdout, NUL-terminated, into buf; waits for it to exit. */
static int finish_describe(const char *bin, describing *d, char *buf, size_t cap)
{
    size_t len = 0;
    ssize_t got;
    while (len + 1 < cap && ((got = read(d->fd, buf + len, cap - 1 - len)) > 0 ||
                             (got < 0 && errno == EINTR)))
        len += got > 0 ? (size_t)got : 0;
    buf[len] = 0;
    close(d->fd);
    int status = 0;
    while (waitpid(d->pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return WIFEXITED(status)
                   ? TB_FAIL(TB_ERR_IO, "%s --describe failed (exit %d%s)", bin,
                             WEXITSTATUS(status),
                             WEXITSTATUS(status) == 127 ? ": not found or not runnable" : "")
                   : TB_FAIL(TB_ERR_IO, "%s --describe was killed by signal %d", bin,
                             WTERMSIG(status));
    return TB_OK;
}

/* Whether s can name a technique, its CSV or a binary: 1 to cap-1 bytes of
 * [A-Za-z0-9_.-], not starting with '.' (no empty, truncated or path name). */
static int valid_name(const char *s, size_t cap)
{
    size_t len = strlen(s);
    if (len == 0 || len >= cap || s[0] == '.')
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == len;
}

/* Reads a JSON array of TB_PROFILES numbers into v; -1 when it is not one. */
static int per_profile(const tb_json *a, double v[TB_PROFILES])
{
    if (!a || a->len != TB_PROFILES)
        return -1;
    for (int p = 0; p < TB_PROFILES; p++) {
        const tb_json *x = tb_json_at(a, (size_t)p);
        if (!x || x->type != TB_JSON_NUMBER)
            return -1;
        v[p] = x->number;
    }
    return 0;
}

int tb_plan_parse_entry(const char *bin, const char *text, tb_plan_entry *e)
{
    tb_json *j = NULL;
    TB_TRY(tb_json_parse(text, strlen(text), 0, &j));
    int rc = TB_OK;
    const tb_json *after = tb_json_get(j, "after");
    const char *name = tb_json_get_string(j, "name", NULL);
    memset(e, 0, sizeof *e);
    if (!name || per_profile(tb_json_get(j, "est_seconds"), e->est_seconds) != 0 || !after ||
        after->type != TB_JSON_ARRAY || after->len > TB_MAX_AFTER) {
        rc = TB_FAIL(TB_ERR_DATA, "%s --describe: no name, est_seconds[%d] or after", bin,
                     TB_PROFILES);
        goto out_free_json;
    }
    /* Every binary of this build writes budget_seconds (technique.c): one
     * without it is stale, and its budget would silently count as 0. */
    if (per_profile(tb_json_get(j, "budget_seconds"), e->budget_seconds) != 0) {
        rc = TB_FAIL(TB_ERR_DATA, "%s --describe: no budget_seconds[%d] (a stale binary?)", bin,
                     TB_PROFILES);
        goto out_free_json;
    }
    for (int p = 0; p < TB_PROFILES; p++)
        if (e->budget_seconds[p] < 0) {
            rc = TB_FAIL(TB_ERR_DATA, "%s --describe: negative budget_seconds[%d]", bin, p);
            goto out_free_json;
        }
    const char *results = tb_json_get_string(j, "results", name);
    if (!valid_name(name, sizeof e->name) || !valid_name(results, sizeof e->results)) {
        rc = TB_FAIL(TB_ERR_DATA, "%s --describe: name or results is not 1 to %zu characters "
                     "of letters, digits, '_', '.' or '-' (a foreign binary?)", bin,
                     sizeof e->name - 1);
        goto out_free_json;
    }
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->results, sizeof e->results, "%s", results);
    double order = tb_json_get_number(j, "order", 0);
    if (!(order >= -1e6 && order <= 1e6)) { /* (int) of 1e300 is undefined behaviour */
        rc = TB_FAIL(TB_ERR_DATA, "%s --describe: order %g out of range", bin, order);
        goto out_free_json;
    }
    e->order = (int)order;
    for (size_t i = 0; i < after->len; i++) {
        const tb_json *a = tb_json_at(after, i);
        if (!a || a->type != TB_JSON_STRING || !valid_name(a->string, sizeof e->after[i])) {
            rc = TB_FAIL(TB_ERR_DATA, "%s --describe: after[%zu] is not a name (a stale "
                         "binary?)", bin, i);
            goto out_free_json;
        }
        snprintf(e->after[i], sizeof e->after[i], "%s", a->string);
    }
out_free_json:
    tb_json_free(j);
    return rc;
}

double tb_plan_profile_limit(int profile)
{
    /* default, full, tiny, gpu (tb_profile); see plan.h for why these. */
    static const double limit_s[TB_PROFILES] = {900, 14400, 600, 600};
    return profile >= 0 && profile < TB_PROFILES ? limit_s[profile] : 0;
}

void tb_plan_budget_sum(const tb_plan_entry *const *entries, int n, int profile,
                        tb_plan_budget *out)
{
    memset(out, 0, sizeof *out);
    out->limit_s = tb_plan_profile_limit(profile);
    for (int i = 0; i < n; i++) {
        double b = entries[i]->budget_seconds[profile];
        out->n++;
        out->est_s += entries[i]->est_seconds[profile];
        if (b > 0)
            out->total_s += b;
        else
            out->undeclared++;
    }
    out->over = out->total_s > out->limit_s;
}

static int by_order_then_name(const void *a, const void *b)
{
    const tb_plan_entry *x = a, *y = b;
    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int find(const tb_plan_entry *e, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(e[i].name, name) == 0)
            return i;
    return -1;
}

/* Whether every technique e names in `after` that is in the plan is placed. */
static int ready(const tb_plan_entry *e, const tb_plan_entry *all, const int *placed, int n)
{
    for (int a = 0; a < TB_MAX_AFTER && e->after[a][0]; a++) {
        int k = find(all, n, e->after[a]);
        if (k >= 0 && !placed[k])
            return 0;
    }
    return 1;
}

/* Stable topological order: at each place, the first entry in (order,
 * name) whose `after` are all placed. */
static int order_entries(tb_plan_entry *e, int n, tb_plan_entry *out)
{
    int *placed = calloc((size_t)n + 1, sizeof *placed);
    if (!placed)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory ordering techniques");
    qsort(e, (size_t)n, sizeof *e, by_order_then_name);
    int rc = TB_OK;
    for (int k = 0; k < n && rc == TB_OK; k++) {
        int pick = -1;
        for (int i = 0; i < n && pick < 0; i++)
            if (!placed[i] && ready(&e[i], e, placed, n))
                pick = i;
        if (pick < 0)
            rc = TB_FAIL(TB_ERR_DATA, "the techniques' `after` declarations form a cycle");
        else {
            placed[pick] = 1;
            out[k] = e[pick];
        }
    }
    free(placed);
    return rc;
}

/* The path of name number i of the comma-separated list. */
static void bin_path(const char *bin_dir, const char *names, int i, char *out, size_t cap)
{
    const char *p = names;
    for (; i > 0; i--)
        p += strcspn(p, ",") + 1;
    snprintf(out, cap, "%s/%.*s", bin_dir, (int)strcspn(p, ","), p);
}

int tb_plan_describe(const char *bin_dir, const char *names, tb_plan_entry **out, int *n)
{
    int count = 1, started = 0, rc = TB_OK;
    for (const char *p = names; *p; p++)
        count += *p == ',';
    tb_plan_entry *e = calloc((size_t)count, sizeof *e), *sorted = calloc((size_t)count, sizeof *e);
    describing *d = calloc((size_t)count, sizeof *d);
    char *text = malloc(1 << 16), bin[4200];
    *out = NULL;
    *n = 0;
    if (!e || !sorted || !d || !text) {
        rc = TB_FAIL(TB_ERR_NOMEM, "out of memory describing techniques");
        goto out_free;
    }
    /* All at once: each answers in a few hundred ms, mostly loading libraries. */
    for (; started < count && rc == TB_OK; started++) {
        bin_path(bin_dir, names, started, bin, sizeof bin);
        rc = start_describe(bin, &d[started]);
    }
    if (rc != TB_OK)
        started--;
    for (int i = 0; i < started; i++) {
        bin_path(bin_dir, names, i, bin, sizeof bin);
        int frc = finish_describe(bin, &d[i], text, 1 << 16);
        if (frc == TB_OK && rc == TB_OK)
            frc = tb_plan_parse_entry(bin, text, &e[i]);
        if (rc == TB_OK)
            rc = frc;
    }
    if (rc == TB_OK)
        rc = order_entries(e, count, sorted);
    if (rc == TB_OK) {
        *out = sorted;
        *n = count;
        sorted = NULL;
    }
out_free:
    free(e);
    free(sorted);
    free(d);
    free(text);
    return rc;
}

/* How much longer than their budgets the techniques so far took (1..3). */
static double keeper_stretch(double spent_s, double granted_s)
{
    double stretch = granted_s > 0 ? spent_s / granted_s : 1.0;
    return stretch < 1.0 ? 1.0 : stretch > 3.0 ? 3.0 : stretch;
}

double tb_plan_budget_cut(double limit_s, double spent_s, double granted_s, double remaining_s,
                          double budget_s)
{
    if (!(limit_s > 0) || !(budget_s > 0) || !(remaining_s > 0))
        return 0;
    double stretch = keeper_stretch(spent_s, granted_s);
    double over = spent_s + stretch * remaining_s - limit_s;
    if (!(over > 0))
        return 0;
    /* A second of budget saves about `stretch` seconds of wall time. */
    double cut = over / stretch * budget_s / remaining_s;
    return cut < TB_BUDGET_MAX_CUT * budget_s ? cut : TB_BUDGET_MAX_CUT * budget_s;
}

double tb_plan_budget_grant(double target_s, double spent_s, double granted_s,
                            double remaining_s, double budget_s)
{
    if (!(target_s > 0) || !(budget_s > 0) || !(remaining_s > 0))
        return 0;
    double stretch = keeper_stretch(spent_s, granted_s);
    double ahead = target_s - (spent_s + stretch * remaining_s);
    if (!(ahead > 0))
        return 0;
    double grant = TB_BUDGET_GRANT_SHARE * ahead / stretch * budget_s / remaining_s;
    return grant < TB_BUDGET_MAX_GRANT * budget_s ? grant : TB_BUDGET_MAX_GRANT * budget_s;
}
