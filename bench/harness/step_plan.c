/* step_plan.c - see step_plan.h. */
#include "bench/harness/step_plan.h"

#include <stdlib.h>

#include "lib/core/status.h"

void tb_step_plan_free(tb_step_plan *p)
{
    free(p->arm_setting);
    free(p->arm_base);
    free(p->arm_aa);
    free(p->set_arm);
    free(p->aa_arm);
    p->arm_setting = p->arm_base = p->arm_aa = p->set_arm = p->aa_arm = NULL;
    p->n_arms = 0;
}

static int check_bases(const int *base, int n)
{
    for (int i = 0; i < n; i++)
        if (base[i] < 0 || base[i] >= n || base[base[i]] != base[i])
            return TB_FAIL(TB_ERR_INVALID, "setting %d: its base %d is not a baseline", i,
                           base[i]);
    return TB_OK;
}

static void add_arm(tb_step_plan *p, int setting, int base_arm, int aa)
{
    int a = p->n_arms++;
    p->arm_setting[a] = setting;
    p->arm_base[a] = base_arm < 0 ? a : base_arm;
    p->arm_aa[a] = aa;
}

int tb_step_plan_make(const int *base, const int *timed, int n, tb_step_plan *p)
{
    *p = (tb_step_plan){0};
    if (n < 1)
        return TB_FAIL(TB_ERR_INVALID, "a technique without settings");
    TB_TRY(check_bases(base, n));
    p->n_settings = n;
    /* at most every setting plus an A/A copy of each */
    p->arm_setting = malloc(2 * (size_t)n * sizeof *p->arm_setting);
    p->arm_base = malloc(2 * (size_t)n * sizeof *p->arm_base);
    p->arm_aa = malloc(2 * (size_t)n * sizeof *p->arm_aa);
    p->set_arm = malloc((size_t)n * sizeof *p->set_arm);
    p->aa_arm = malloc((size_t)n * sizeof *p->aa_arm);
    if (!p->arm_setting || !p->arm_base || !p->arm_aa || !p->set_arm || !p->aa_arm) {
        tb_step_plan_free(p);
        return TB_FAIL(TB_ERR_NOMEM, "out of memory planning %d settings", n);
    }
    for (int i = 0; i < n; i++)
        p->set_arm[i] = p->aa_arm[i] = -1;
    /* baselines first, so that a compared setting finds its base's arm */
    for (int i = 0; i < n; i++)
        if (timed[i] && base[i] == i) {
            p->set_arm[i] = p->n_arms;
            add_arm(p, i, -1, 0);
        }
    for (int i = 0; i < n; i++)
        if (timed[i] && base[i] != i && p->set_arm[base[i]] >= 0) {
            p->set_arm[i] = p->n_arms;
            add_arm(p, i, p->set_arm[base[i]], 0);
        }
    for (int i = 0; i < n; i++)
        if (timed[i] && base[i] == i) {
            p->aa_arm[i] = p->n_arms;
            add_arm(p, i, p->set_arm[i], 1);
        }
    return TB_OK;
}

int tb_step_plan_alone(const tb_step_plan *p, const double *peak_bytes, double limit_bytes,
                       int *alone)
{
    double alive = 0, most = 0; /* the arms alive; the largest arm rebuilt */
    int count = 0;
    for (int a = 0; a < p->n_arms; a++) {
        alone[a] = 0;
        alive += peak_bytes[p->arm_setting[a]];
    }
    if (!(limit_bytes > 0))
        return 0;
    while (alive + most > limit_bytes) {
        int group = -1;
        double group_sum = -1;
        for (int b = 0; b < p->n_arms; b++) {
            if (p->arm_base[b] != b || alone[b])
                continue;
            double sum = 0;
            for (int a = 0; a < p->n_arms; a++)
                if (p->arm_base[a] == b)
                    sum += peak_bytes[p->arm_setting[a]];
            if (sum > group_sum) {
                group = b;
                group_sum = sum;
            }
        }
        if (group < 0) /* all rebuilt: one at a time is the least there is */
            break;
        for (int a = 0; a < p->n_arms; a++) {
            if (p->arm_base[a] != group)
                continue;
            double peak = peak_bytes[p->arm_setting[a]];
            alone[a] = 1;
            count++;
            alive -= peak;
            most = peak > most ? peak : most;
        }
    }
    return count;
}

/* Whether the arms marked in `parked` (NULL: every arm; the rest alive)
 * fit: the alive arms' peaks, the parked arms' kept bytes and the largest
 * parked arm's activations (one unparked at a time). 0 also where a parked
 * arm's kept bytes are unknown. */
static int parked_fit(const tb_step_plan *p, const double *peak, const double *kept,
                      const int *parked, double limit)
{
    double sum = 0, most = 0;
    for (int a = 0; a < p->n_arms; a++) {
        int s = p->arm_setting[a];
        if (parked && !parked[a]) {
            sum += peak[s];
            continue;
        }
        if (!(kept[s] > 0))
            return 0;
        sum += kept[s];
        double acts = peak[s] > kept[s] ? peak[s] - kept[s] : 0;
        most = acts > most ? acts : most;
    }
    return sum + most <= limit;
}

int tb_step_plan_park(const tb_step_plan *p, const double *peak_bytes, const double *kept_bytes,
                      const int *graphs, double limit_bytes, int *mode)
{
    /* tb_step_plan_alone's 0/1 into mode; TB_ARM_REBUILT is its 1 */
    int away = tb_step_plan_alone(p, peak_bytes, limit_bytes, mode);
    if (away == 0)
        return 0;
    int graph_alive = 0;
    for (int a = 0; a < p->n_arms; a++)
        graph_alive |= mode[a] == TB_ARM_ALIVE && graphs && graphs[p->arm_setting[a]];
    int some = !graph_alive && parked_fit(p, peak_bytes, kept_bytes, mode, limit_bytes);
    int all = !some && parked_fit(p, peak_bytes, kept_bytes, NULL, limit_bytes);
    if (!some && !all)
        return away;
    for (int a = 0; a < p->n_arms; a++)
        mode[a] = all || mode[a] == TB_ARM_REBUILT ? TB_ARM_PARKED : TB_ARM_ALIVE;
    return all ? p->n_arms : away;
}
