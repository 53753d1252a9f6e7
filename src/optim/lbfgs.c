/* torch.optim.LBFGS (1.13): limited-memory BFGS over all parameters flattened into one vector,
 * with a fixed step or the strong-Wolfe line search (cubic interpolation, zoom phase) of
 * torch's _strong_wolfe. Driven by pt_optim_step_closure (the closure re-evaluates the loss and
 * gradients, several times per step). One parameter group, CPU parameters.
 *
 * The flat vectors (direction d, history old_dirs / old_stps, prev_flat_grad) and the scalars
 * are kept in double precision; torch computes them in the parameters' dtype, so float32
 * trajectories agree to float32 rounding. The parameters themselves are updated in their own
 * dtype (p += t * d with d rounded to it, as torch's p.add_(d_view, alpha=t)). The state dict
 * converts to/from torch's layout (state of parameter 0). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "optim_internal.h"

static const char STRONG_WOLFE[] = "strong_wolfe";

static const pti_hparam lbfgs_hparams[] = {
    {"lr", PTI_HP_FLOAT, offsetof(pt_lbfgs_opts, lr)},
    {"max_iter", PTI_HP_INT, offsetof(pt_lbfgs_opts, max_iter)},
    {"max_eval", PTI_HP_OPT_INT, offsetof(pt_lbfgs_opts, max_eval)},
    {"tolerance_grad", PTI_HP_FLOAT, offsetof(pt_lbfgs_opts, tolerance_grad)},
    {"tolerance_change", PTI_HP_FLOAT, offsetof(pt_lbfgs_opts, tolerance_change)},
    {"history_size", PTI_HP_INT, offsetof(pt_lbfgs_opts, history_size)},
    {"line_search_fn", PTI_HP_STR, offsetof(pt_lbfgs_opts, line_search_fn)},
};

/* The algorithm's whole state (torch's self.state[params[0]]). */
typedef struct lbfgs_state {
    int64_t n; /* total number of elements */
    int64_t func_evals, n_iter;
    bool has_d;         /* d, t, old_*, ro, H_diag, prev_* were saved by a step */
    bool has_al;        /* 'al' exists (second iteration reached) */
    bool h_diag_is_one; /* H_diag is still the int 1 */
    double t, h_diag, prev_loss;
    double *d, *prev_flat_grad;
    bool f32;      /* float32 parameters: values rounded as torch's float32 tensors */
    int hist, cap; /* history length / capacity (history_size) */
    double **old_dirs, **old_stps, *ro;
    double *al;
    bool *al_set;
} lbfgs_state;

/* Rounds x as torch would store it (float32 parameters keep float32 vectors and scalars). */
static inline double rf(const lbfgs_state *s, double x)
{
    return s->f32 ? (double)(float)x : x;
}

static void lbfgs_state_clear(lbfgs_state *s)
{
    for (int k = 0; k < s->hist; k++) {
        free(s->old_dirs[k]);
        free(s->old_stps[k]);
    }
    free(s->old_dirs);
    free(s->old_stps);
    free(s->ro);
    free(s->al);
    free(s->al_set);
    free(s->d);
    free(s->prev_flat_grad);
    int64_t n = s->n;
    bool f32 = s->f32;
    memset(s, 0, sizeof(*s));
    s->n = n;
    s->f32 = f32;
}

static void lbfgs_free_impl(void *impl)
{
    if (impl)
        lbfgs_state_clear(impl);
    free(impl);
}

static pt_status lbfgs_check(const char *op, const void *opts)
{
    const pt_lbfgs_opts *o = opts;
    pt_status st = pti_optim_check_nonneg(op, "learning rate", o->lr);
    if (st == PT_OK && o->max_iter < 1)
        st =
            pti_error(PT_ERR_INVALID_ARG, "%s: Invalid max_iter: %lld", op, (long long)o->max_iter);
    if (st == PT_OK && o->history_size < 1)
        st = pti_error(PT_ERR_INVALID_ARG, "%s: Invalid history_size: %lld", op,
                       (long long)o->history_size);
    if (st == PT_OK && o->line_search_fn && strcmp(o->line_search_fn, STRONG_WOLFE) != 0)
        st = pti_error(PT_ERR_INVALID_ARG,
                       "%s: only 'strong_wolfe' is supported as "
                       "line_search_fn, got '%s'",
                       op, o->line_search_fn);
    return st;
}

static pt_status lbfgs_init(pt_optim *o, const void *opts, const pt_tensor *p, pti_param_state *s)
{
    (void)o, (void)opts, (void)p, (void)s;
    return PT_OK;
}

/* ---- flat vectors ------------------------------------------------------------------------- */

static double *vec_new(int64_t n)
{
    return pti_calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

static double *vec_dup(const double *x, int64_t n)
{
    double *y = vec_new(n);
    if (y)
        memcpy(y, x, sizeof(double) * (size_t)n);
    return y;
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static double abs_max(const double *a, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return m;
}

/* torch's _gather_flat_grad: every parameter's gradient (zeros when None), concatenated. */
static pt_status gather_flat_grad(const pti_optim_group *g, double *out)
{
    int64_t off = 0;
    for (int i = 0; i < g->n; i++) {
        const pt_tensor *p = g->params[i];
        int64_t n = pt_numel(p);
        if (!p->grad) {
            memset(out + off, 0, sizeof(double) * (size_t)n);
        } else {
            pt_tensor *c = pt_to_dtype(p->grad, PT_FLOAT64);
            pt_tensor *cc = c ? pt_contiguous(c) : NULL;
            pt_release(c);
            if (!cc)
                return pt_last_status();
            memcpy(out + off, pti_data(cc), sizeof(double) * (size_t)n);
            pt_release(cc);
        }
        off += n;
    }
    return PT_OK;
}

/* torch's _add_grad: p += t * d[slice] (d rounded to p's dtype first). */
static pt_status add_grad(const pti_optim_group *g, double t, const double *d)
{
    int64_t off = 0;
    pt_no_grad_begin();
    pt_status st = PT_OK;
    for (int i = 0; i < g->n && st == PT_OK; i++) {
        pt_tensor *p = g->params[i];
        pt_tensor *v = pt_from_data(d + off, pt_ndim(p), pt_shape(p), PT_FLOAT64, pt_cpu());
        pt_tensor *vp = v ? pt_to_dtype(v, pt_dtype_of(p)) : NULL;
        st = vp ? pt_add_alpha_(p, vp, t) : pt_last_status();
        pt_release(vp);
        pt_release(v);
        off += pt_numel(p);
    }
    pt_no_grad_end();
    return st;
}

/* ---- closure evaluation ------------------------------------------------------------------- */

typedef struct lbfgs_ctx {
    pt_optim *o;
    const pti_optim_group *g;
    double (*closure)(void *user);
    void *user;
    int64_t n;
} lbfgs_ctx;

static pt_status call_closure(const lbfgs_ctx *c, double *loss)
{
    bool prev = pt_set_grad_enabled(true);
    double l = c->closure(c->user);
    pt_set_grad_enabled(prev);
    if (isnan(l)) {
        if (pt_last_status() == PT_OK)
            pti_error(PT_ERR_RUNTIME, "pt_optim_step_closure: the closure reported an error");
        return pt_last_status();
    }
    *loss = l;
    return PT_OK;
}

/* torch's _directional_evaluate: loss and flat gradient at x + t d, then params back to x. */
static pt_status directional_evaluate(const lbfgs_ctx *c, pt_tensor **x, double t, const double *d,
                                      double *f, double *grad)
{
    pt_status st = add_grad(c->g, t, d);
    if (st == PT_OK)
        st = call_closure(c, f);
    if (st == PT_OK)
        st = gather_flat_grad(c->g, grad);
    pt_no_grad_begin();
    for (int i = 0; i < c->g->n && st == PT_OK; i++)
        st = pt_copy_(c->g->params[i], x[i]);
    pt_no_grad_end();
    return st;
}

/* ---- strong Wolfe line search ------------------------------------------------------------- */

static double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                                const double *bounds)
{
    double lo = bounds ? bounds[0] : (x1 <= x2 ? x1 : x2);
    double hi = bounds ? bounds[1] : (x1 <= x2 ? x2 : x1);
    double d1 = g1 + g2 - 3.0 * (f1 - f2) / (x1 - x2);
    double d2_square = d1 * d1 - g1 * g2;
    if (!(d2_square >= 0.0))
        return (lo + hi) / 2.0;
    double d2 = sqrt(d2_square);
    double min_pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2.0 * d2))
                              : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2.0 * d2));
    return fmin(fmax(min_pos, lo), hi);
}

/* The line search's working vectors. */
typedef struct wolfe_bufs {
    double *g_new, *g_prev, *bg[2];
} wolfe_bufs;

typedef struct wolfe_point {
    double t, f, gtd;
} wolfe_point;

/* torch's _strong_wolfe (c1 1e-4, c2 0.9, tolerance_change 1e-9, max_ls 25). On entry *f and
 * grad hold the loss and flat gradient at t = 0 and *t the first trial step; on return they
 * hold the accepted point. */
static pt_status strong_wolfe(const lbfgs_ctx *c, pt_tensor **x, const double *d, double *t_io,
                              double *f_io, double *grad, double gtd, int64_t *evals, wolfe_bufs *w)
{
    const double c1 = 1e-4, c2 = 0.9, tol = 1e-9;
    const int max_ls = 25;
    int64_t n = c->n;
    double f = *f_io, t = *t_io, d_norm = abs_max(d, n), f_new = 0.0;
    pt_status st = directional_evaluate(c, x, t, d, &f_new, w->g_new);
    if (st != PT_OK)
        return st;
    *evals = 1;
    double gtd_new = dot(w->g_new, d, n);
    wolfe_point prev = {0.0, f, gtd}, br[2] = {{0}};
    memcpy(w->g_prev, grad, sizeof(double) * (size_t)n);
    bool done = false;
    int ls_iter = 0, nb = 0;
    while (ls_iter < max_ls) {
        bool armijo_fails = f_new > f + c1 * t * gtd || (ls_iter > 1 && f_new >= prev.f);
        if (!armijo_fails && fabs(gtd_new) <= -c2 * gtd) {
            br[0] = (wolfe_point){t, f_new, gtd_new};
            memcpy(w->bg[0], w->g_new, sizeof(double) * (size_t)n);
            nb = 1;
            done = true;
            break;
        }
        if (armijo_fails || gtd_new >= 0.0) {
            br[0] = prev;
            br[1] = (wolfe_point){t, f_new, gtd_new};
            memcpy(w->bg[0], w->g_prev, sizeof(double) * (size_t)n);
            memcpy(w->bg[1], w->g_new, sizeof(double) * (size_t)n);
            nb = 2;
            break;
        }
        double bounds[2] = {t + 0.01 * (t - prev.t), t * 10.0};
        double tmp = t;
        t = cubic_interpolate(prev.t, prev.f, prev.gtd, t, f_new, gtd_new, bounds);
        prev = (wolfe_point){tmp, f_new, gtd_new};
        memcpy(w->g_prev, w->g_new, sizeof(double) * (size_t)n);
        if ((st = directional_evaluate(c, x, t, d, &f_new, w->g_new)) != PT_OK)
            return st;
        (*evals)++;
        gtd_new = dot(w->g_new, d, n);
        ls_iter++;
    }
    if (ls_iter == max_ls) {
        br[0] = (wolfe_point){0.0, f, br[0].gtd};
        br[1] = (wolfe_point){t, f_new, br[1].gtd};
        memcpy(w->bg[0], grad, sizeof(double) * (size_t)n);
        memcpy(w->bg[1], w->g_new, sizeof(double) * (size_t)n);
        nb = 2;
    }
    bool insuf_progress = false;
    int low = 0, high = 1;
    if (nb == 2 && !(br[0].f <= br[1].f))
        low = 1, high = 0;
    while (!done && ls_iter < max_ls) {
        if (fabs(br[1].t - br[0].t) * d_norm < tol)
            break;
        t = cubic_interpolate(br[0].t, br[0].f, br[0].gtd, br[1].t, br[1].f, br[1].gtd, NULL);
        double bmax = fmax(br[0].t, br[1].t), bmin = fmin(br[0].t, br[1].t);
        double eps = 0.1 * (bmax - bmin);
        if (fmin(bmax - t, t - bmin) < eps) {
            if (insuf_progress || t >= bmax || t <= bmin) {
                t = fabs(t - bmax) < fabs(t - bmin) ? bmax - eps : bmin + eps;
                insuf_progress = false;
            } else {
                insuf_progress = true;
            }
        } else {
            insuf_progress = false;
        }
        if ((st = directional_evaluate(c, x, t, d, &f_new, w->g_new)) != PT_OK)
            return st;
        (*evals)++;
        gtd_new = dot(w->g_new, d, n);
        ls_iter++;
        if (f_new > f + c1 * t * gtd || f_new >= br[low].f) {
            br[high] = (wolfe_point){t, f_new, gtd_new};
            memcpy(w->bg[high], w->g_new, sizeof(double) * (size_t)n);
            low = br[0].f <= br[1].f ? 0 : 1;
            high = 1 - low;
        } else {
            if (fabs(gtd_new) <= -c2 * gtd) {
                done = true;
            } else if (gtd_new * (br[high].t - br[low].t) >= 0.0) {
                br[high] = br[low];
                memcpy(w->bg[high], w->bg[low], sizeof(double) * (size_t)n);
            }
            br[low] = (wolfe_point){t, f_new, gtd_new};
            memcpy(w->bg[low], w->g_new, sizeof(double) * (size_t)n);
        }
    }
    *t_io = br[low].t;
    *f_io = br[low].f;
    memcpy(grad, w->bg[low], sizeof(double) * (size_t)n);
    return PT_OK;
}

/* ---- the L-BFGS direction ------------------------------------------------------------------ */

/* Allocates the history arrays (capacity history_size) on first use. */
static pt_status ensure_history(lbfgs_state *s, int cap)
{
    if (s->old_dirs && s->cap == cap)
        return PT_OK;
    if (s->old_dirs && s->cap != cap)
        return pti_error(PT_ERR_INVALID_ARG, "pt_optim_step: LBFGS history_size changed "
                                             "after the first step");
    s->cap = cap;
    s->old_dirs = pti_calloc((size_t)cap, sizeof(double *));
    s->old_stps = pti_calloc((size_t)cap, sizeof(double *));
    s->ro = pti_calloc((size_t)cap, sizeof(double));
    s->al = pti_calloc((size_t)cap, sizeof(double));
    s->al_set = pti_calloc((size_t)cap, sizeof(bool));
    if (!s->old_dirs || !s->old_stps || !s->ro || !s->al || !s->al_set)
        return pti_error(PT_ERR_OOM, "pt_optim_step: out of memory (LBFGS history)");
    return PT_OK;
}

/* Updates the memory with y = g - g_prev, s = d t, then d = -H g (two-loop recursion). */
static pt_status lbfgs_direction(lbfgs_state *s, const double *flat_grad)
{
    int64_t n = s->n;
    double *y = vec_new(n), *sv = vec_new(n);
    if (!y || !sv) {
        free(y);
        free(sv);
        return pti_error(PT_ERR_OOM, "pt_optim_step: out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        y[i] = rf(s, flat_grad[i] - s->prev_flat_grad[i]);
        sv[i] = rf(s, s->d[i] * rf(s, s->t));
    }
    double ys = rf(s, dot(y, sv, n));
    if (ys > 1e-10) {
        if (s->hist == s->cap) {
            free(s->old_dirs[0]);
            free(s->old_stps[0]);
            memmove(s->old_dirs, s->old_dirs + 1, sizeof(double *) * (size_t)(s->cap - 1));
            memmove(s->old_stps, s->old_stps + 1, sizeof(double *) * (size_t)(s->cap - 1));
            memmove(s->ro, s->ro + 1, sizeof(double) * (size_t)(s->cap - 1));
            s->hist--;
        }
        s->old_dirs[s->hist] = y;
        s->old_stps[s->hist] = sv;
        s->ro[s->hist] = rf(s, 1.0 / ys);
        s->hist++;
        s->h_diag = rf(s, ys / rf(s, dot(y, y, n)));
        s->h_diag_is_one = false;
    } else {
        free(y);
        free(sv);
    }
    s->has_al = true;
    double *q = s->d; /* overwritten in place: d = r = q * H_diag */
    for (int64_t i = 0; i < n; i++)
        q[i] = -flat_grad[i];
    for (int k = s->hist - 1; k >= 0; k--) {
        s->al[k] = rf(s, rf(s, dot(s->old_stps[k], q, n)) * s->ro[k]);
        s->al_set[k] = true;
        for (int64_t i = 0; i < n; i++)
            q[i] = rf(s, q[i] - s->al[k] * s->old_dirs[k][i]);
    }
    for (int64_t i = 0; i < n; i++)
        q[i] = rf(s, q[i] * s->h_diag);
    for (int k = 0; k < s->hist; k++) {
        double be = rf(s, rf(s, dot(s->old_dirs[k], q, n)) * s->ro[k]);
        double alpha = rf(s, s->al[k] - be);
        for (int64_t i = 0; i < n; i++)
            q[i] = rf(s, q[i] + alpha * s->old_stps[k][i]);
    }
    return PT_OK;
}

/* ---- the step ------------------------------------------------------------------------------- */

typedef struct lbfgs_work {
    double *flat_grad;
    wolfe_bufs w;
    pt_tensor **x; /* parameter copies for the line search */
} lbfgs_work;

static void work_free(lbfgs_work *k, int n_params)
{
    free(k->flat_grad);
    free(k->w.g_new);
    free(k->w.g_prev);
    free(k->w.bg[0]);
    free(k->w.bg[1]);
    if (k->x)
        for (int i = 0; i < n_params; i++)
            pt_release(k->x[i]);
    free(k->x);
}

static pt_status work_new(lbfgs_work *k, const pti_optim_group *g, int64_t n, bool wolfe)
{
    memset(k, 0, sizeof(*k));
    k->flat_grad = vec_new(n);
    if (wolfe) {
        k->w.g_new = vec_new(n), k->w.g_prev = vec_new(n);
        k->w.bg[0] = vec_new(n), k->w.bg[1] = vec_new(n);
        k->x = pti_calloc((size_t)g->n, sizeof(*k->x));
    }
    if (!k->flat_grad ||
        (wolfe && (!k->w.g_new || !k->w.g_prev || !k->w.bg[0] || !k->w.bg[1] || !k->x)))
        return pti_error(PT_ERR_OOM, "pt_optim_step: out of memory");
    return PT_OK;
}

/* Clones the parameters into k->x (torch's _clone_param). */
static pt_status clone_params(lbfgs_work *k, const pti_optim_group *g)
{
    for (int i = 0; i < g->n; i++) {
        pt_release(k->x[i]);
        pt_tensor *c = pt_detach(g->params[i]);
        k->x[i] = c ? pt_clone(c) : NULL;
        pt_release(c);
        if (!k->x[i])
            return pt_last_status();
        pt_retain(k->x[i]); /* a plain reference (not tied to the caller's scope) */
        pt_release(k->x[i]);
    }
    return PT_OK;
}

/* One inner iteration after the direction is known; sets *stop to leave the loop. */
static pt_status lbfgs_move(const lbfgs_ctx *c, lbfgs_state *s, lbfgs_work *k,
                            const pt_lbfgs_opts *o, int64_t n_iter, double *loss,
                            int64_t *current_evals, bool *stop)
{
    int64_t n = s->n;
    memcpy(s->prev_flat_grad, k->flat_grad, sizeof(double) * (size_t)n);
    s->prev_loss = *loss;
    double t = o->lr;
    if (s->n_iter == 1) {
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++)
            sum += fabs(k->flat_grad[i]);
        t = fmin(1.0, rf(s, 1.0 / rf(s, sum)));
        t = t < 1.0 ? rf(s, t * o->lr) : t * o->lr;
    }
    double gtd = rf(s, dot(k->flat_grad, s->d, n));
    if (gtd > -o->tolerance_change) {
        *stop = true;
        return PT_OK;
    }
    int64_t ls_evals = 0;
    bool opt_cond = false;
    pt_status st = PT_OK;
    if (o->line_search_fn) {
        st = clone_params(k, c->g);
        if (st == PT_OK)
            st = strong_wolfe(c, k->x, s->d, &t, loss, k->flat_grad, gtd, &ls_evals, &k->w);
        if (st == PT_OK)
            st = add_grad(c->g, t, s->d);
        opt_cond = abs_max(k->flat_grad, n) <= o->tolerance_grad;
    } else {
        st = add_grad(c->g, t, s->d);
        if (st == PT_OK && n_iter != o->max_iter) {
            st = call_closure(c, loss);
            if (st == PT_OK)
                st = gather_flat_grad(c->g, k->flat_grad);
            opt_cond = abs_max(k->flat_grad, n) <= o->tolerance_grad;
            ls_evals = 1;
        }
    }
    s->t = t;
    if (st != PT_OK)
        return st;
    *current_evals += ls_evals;
    s->func_evals += ls_evals;
    int64_t max_eval = o->max_eval >= 0 ? o->max_eval : o->max_iter * 5 / 4;
    *stop = n_iter == o->max_iter || *current_evals >= max_eval || opt_cond ||
            abs_max(s->d, n) * fabs(t) <= o->tolerance_change ||
            fabs(*loss - s->prev_loss) < o->tolerance_change;
    return PT_OK;
}

static pt_status lbfgs_iterate(const lbfgs_ctx *c, lbfgs_state *s, lbfgs_work *k,
                               const pt_lbfgs_opts *o, double loss)
{
    int64_t current_evals = 1;
    bool stop = false;
    pt_status st = PT_OK;
    if (!s->d && (!(s->d = vec_new(s->n)) || !(s->prev_flat_grad = vec_new(s->n))))
        return pti_error(PT_ERR_OOM, "pt_optim_step: out of memory");
    st = ensure_history(s, (int)o->history_size);
    for (int64_t n_iter = 1; n_iter <= o->max_iter && st == PT_OK && !stop; n_iter++) {
        s->n_iter++;
        if (s->n_iter == 1) {
            for (int64_t i = 0; i < s->n; i++)
                s->d[i] = -k->flat_grad[i];
            for (int j = 0; j < s->hist; j++) {
                free(s->old_dirs[j]);
                free(s->old_stps[j]);
            }
            s->hist = 0;
            s->h_diag = 1.0;
            s->h_diag_is_one = true;
        } else {
            st = lbfgs_direction(s, k->flat_grad);
            if (st != PT_OK)
                break;
        }
        s->has_d = true;
        st = lbfgs_move(c, s, k, o, n_iter, &loss, &current_evals, &stop);
    }
    return st;
}

static pt_status lbfgs_step(pt_optim *o, double (*closure)(void *user), void *user, double *loss)
{
    if (!closure)
        return pti_error(PT_ERR_INVALID_ARG, "pt_optim_step: LBFGS needs a closure (use "
                                             "pt_optim_step_closure)");
    if (o->n_groups != 1)
        return pti_error(PT_ERR_INVALID_ARG, "pt_optim_step: LBFGS doesn't support "
                                             "per-parameter options (parameter groups)");
    const pti_optim_group *g = &o->groups[0];
    const pt_lbfgs_opts *op = g->opts;
    lbfgs_state *s = o->impl;
    for (int i = 0; i < g->n; i++)
        if (!pti_is_cpu(g->params[i]))
            return pti_error(PT_ERR_DEVICE, "pt_optim_step: LBFGS supports CPU parameters only");
    lbfgs_ctx c = {o, g, closure, user, s->n};
    double l = 0.0;
    pt_status st = call_closure(&c, &l);
    if (st != PT_OK)
        return st;
    if (loss)
        *loss = l;
    s->func_evals++;
    lbfgs_work k;
    st = work_new(&k, g, s->n, op->line_search_fn != NULL);
    if (st == PT_OK)
        st = gather_flat_grad(g, k.flat_grad);
    if (st == PT_OK && !(abs_max(k.flat_grad, s->n) <= op->tolerance_grad))
        st = lbfgs_iterate(&c, s, &k, op, l);
    work_free(&k, g->n);
    return st;
}

/* ---- state dict ------------------------------------------------------------------------------ */

/* A [n] tensor (or 0-dim when n < 0) of the parameters' dtype from doubles. */
static pt_value *vec_value(const pt_optim *o, const double *x, int64_t n)
{
    int64_t shape[1] = {n};
    pt_tensor *t = pt_from_data(x, n < 0 ? 0 : 1, shape, PT_FLOAT64, pt_cpu());
    pt_tensor *c = t ? pt_to_dtype(t, pt_dtype_of(o->groups[0].params[0])) : NULL;
    pt_release(t);
    pt_value *v = c ? pt_value_tensor(c) : NULL;
    pt_release(c);
    return v;
}

static pt_value *list_value(const pt_optim *o, double *const *xs, const double *scalars,
                            const bool *present, int n_items, int64_t n)
{
    pt_value *l = pt_value_list();
    pt_status st = l ? PT_OK : pt_last_status();
    for (int k = 0; k < n_items && st == PT_OK; k++) {
        pt_value *v = present && !present[k] ? pt_value_none()
                      : xs                   ? vec_value(o, xs[k], n)
                                             : vec_value(o, &scalars[k], -1);
        st = pt_value_append(l, v);
    }
    if (st != PT_OK) {
        pt_value_free(l);
        return NULL;
    }
    return l;
}

static pt_status lbfgs_save(pt_optim *o, int group, int i, int gi, pt_value **out)
{
    (void)gi;
    *out = NULL;
    const lbfgs_state *s = o->impl;
    if (group != 0 || i != 0 || s->func_evals == 0)
        return PT_OK;
    pt_value *d = pt_value_dict();
    pt_status st = d ? PT_OK : pt_last_status();
    if (st == PT_OK)
        st = pt_value_dict_set_str(d, "func_evals", pt_value_int(s->func_evals));
    if (st == PT_OK)
        st = pt_value_dict_set_str(d, "n_iter", pt_value_int(s->n_iter));
    if (st == PT_OK && s->has_al)
        st = pt_value_dict_set_str(d, "al", list_value(o, NULL, s->al, s->al_set, s->cap, 0));
    if (st == PT_OK && s->has_d) {
        st = pt_value_dict_set_str(d, "d", vec_value(o, s->d, s->n));
        if (st == PT_OK)
            st = pt_value_dict_set_str(d, "t", pt_value_float(s->t));
        if (st == PT_OK)
            st = pt_value_dict_set_str(d, "old_dirs",
                                       list_value(o, s->old_dirs, NULL, NULL, s->hist, s->n));
        if (st == PT_OK)
            st = pt_value_dict_set_str(d, "old_stps",
                                       list_value(o, s->old_stps, NULL, NULL, s->hist, s->n));
        if (st == PT_OK)
            st = pt_value_dict_set_str(d, "ro", list_value(o, NULL, s->ro, NULL, s->hist, 0));
        if (st == PT_OK)
            st = pt_value_dict_set_str(
                d, "H_diag", s->h_diag_is_one ? pt_value_int(1) : vec_value(o, &s->h_diag, -1));
        if (st == PT_OK)
            st = pt_value_dict_set_str(d, "prev_flat_grad", vec_value(o, s->prev_flat_grad, s->n));
        if (st == PT_OK)
            st = pt_value_dict_set_str(d, "prev_loss", pt_value_float(s->prev_loss));
    }
    if (st != PT_OK) {
        pt_value_free(d);
        return st;
    }
    *out = d;
    return PT_OK;
}

#define LOP "pt_optim_load_state_dict"

static const pt_value *get_key(const pt_value *d, const char *key)
{
    for (int64_t k = 0; k < pt_value_len(d); k++) {
        const char *s = pt_value_as_str(pt_value_key_ref(d, k), NULL);
        if (s && strcmp(s, key) == 0)
            return pt_value_item_ref(d, k);
    }
    return NULL;
}

/* A key the next step reads; PT_ERR_FORMAT naming it when absent or None. */
static const pt_value *need_key(const pt_value *d, const char *key)
{
    const pt_value *v = get_key(d, key);
    if (!v || pt_value_is(v, PT_VALUE_NONE))
        return pti_error_null(PT_ERR_FORMAT,
                              "%s: LBFGS state 0 has no '%s' (the algorithm needs it)", LOP, key);
    return v;
}

static pt_status read_scalar(const pt_value *v, const char *key, double *out)
{
    if (!v)
        return pt_last_status(); /* need_key's error */
    if (pt_value_is(v, PT_VALUE_TENSOR)) {
        pt_tensor *t = pt_value_tensor_ref(v);
        if (pt_numel(t) != 1)
            return pti_error(PT_ERR_SHAPE, "%s: LBFGS state '%s' must have one element", LOP, key);
        *out = pt_item(t);
        return PT_OK;
    }
    if (pt_value_as_float(v, out) != PT_OK)
        return pti_error(PT_ERR_FORMAT, "%s: LBFGS state '%s' must be a number", LOP, key);
    return PT_OK;
}

/* A counter: a number >= 0 (torch's are ints). */
static pt_status read_count(const pt_value *sv, const char *key, int64_t *out)
{
    double v = 0.0;
    pt_status st = read_scalar(need_key(sv, key), key, &v);
    if (st == PT_OK && !(v >= 0.0 && v <= 9.0e15))
        st = pti_error(PT_ERR_FORMAT, "%s: LBFGS state '%s' must be a count >= 0, got %g", LOP, key,
                       v);
    *out = (int64_t)v;
    return st;
}

/* A flat [n] vector from a floating tensor value (NULL with the error set on mismatch). */
static double *read_vec(const pt_value *v, const char *key, int64_t n)
{
    if (!v)
        return NULL; /* need_key's error */
    pt_tensor *t = pt_value_tensor_ref(v);
    if (!t || pt_numel(t) != n)
        return pti_error_null(PT_ERR_SHAPE,
                              "%s: LBFGS state '%s' must be a tensor of %lld "
                              "elements",
                              LOP, key, (long long)n);
    /* an integer or bool tensor is no direction or gradient: torch would fail in the step */
    if (!pt_dtype_is_floating(pt_dtype_of(t)))
        return pti_error_null(PT_ERR_DTYPE,
                              "%s: LBFGS state '%s' must be a floating tensor like the "
                              "parameters, got %s",
                              LOP, key, pt_dtype_name(pt_dtype_of(t)));
    pt_tensor *c = pt_to_dtype(t, PT_FLOAT64);
    pt_tensor *cc = c ? pt_contiguous(c) : NULL;
    pt_release(c);
    double *x = cc ? vec_dup(pti_data(cc), n) : NULL;
    pt_release(cc);
    if (cc && !x)
        return pti_error_null(PT_ERR_OOM, "%s: out of memory", LOP);
    return x;
}

static bool is_seq(const pt_value *v)
{
    return pt_value_is(v, PT_VALUE_LIST) || pt_value_is(v, PT_VALUE_TUPLE);
}

static pt_status read_history(lbfgs_state *s, const pt_value *sv)
{
    const pt_value *dirs = need_key(sv, "old_dirs");
    const pt_value *stps = dirs ? need_key(sv, "old_stps") : NULL;
    const pt_value *ro = stps ? need_key(sv, "ro") : NULL;
    if (!ro)
        return pt_last_status();
    int64_t h = pt_value_len(dirs);
    if (!is_seq(dirs) || !is_seq(stps) || !is_seq(ro) || pt_value_len(stps) != h ||
        pt_value_len(ro) != h || h > s->cap)
        return pti_error(PT_ERR_FORMAT,
                         "%s: LBFGS old_dirs, old_stps and ro must be lists of "
                         "one length <= history_size",
                         LOP);
    for (int64_t k = 0; k < h; k++) {
        s->old_dirs[k] = read_vec(pt_value_item_ref(dirs, k), "old_dirs", s->n);
        s->old_stps[k] = read_vec(pt_value_item_ref(stps, k), "old_stps", s->n);
        s->hist = (int)k + 1;
        if (!s->old_dirs[k] || !s->old_stps[k] ||
            read_scalar(pt_value_item_ref(ro, k), "ro", &s->ro[k]) != PT_OK)
            return pt_last_status();
    }
    return PT_OK;
}

/* Once a step ran (n_iter >= 1) the next one continues from d, t, the history, H_diag and
 * prev_flat_grad, so each must be there (a missing one would silently restart from zeros).
 * 'al' is scratch space and prev_loss is overwritten before it is read: both optional, as in
 * torch. */
static pt_status read_state(lbfgs_state *s, const pt_value *sv, int cap)
{
    pt_status st = read_count(sv, "func_evals", &s->func_evals);
    if (st == PT_OK)
        st = read_count(sv, "n_iter", &s->n_iter);
    if (st == PT_OK)
        st = ensure_history(s, cap);
    const pt_value *al = get_key(sv, "al");
    s->has_al = al != NULL;
    if (al && !is_seq(al) && st == PT_OK)
        st = pti_error(PT_ERR_FORMAT, "%s: LBFGS state 'al' must be a list", LOP);
    for (int64_t k = 0; al && k < pt_value_len(al) && k < cap && st == PT_OK; k++) {
        const pt_value *a = pt_value_item_ref(al, k);
        s->al_set[k] = !pt_value_is(a, PT_VALUE_NONE);
        if (s->al_set[k])
            st = read_scalar(a, "al", &s->al[k]);
    }
    if (st != PT_OK || (s->n_iter == 0 && !get_key(sv, "d")))
        return st;
    s->has_d = true;
    if (!(s->d = read_vec(need_key(sv, "d"), "d", s->n)) ||
        !(s->prev_flat_grad = read_vec(need_key(sv, "prev_flat_grad"), "prev_flat_grad", s->n)))
        return pt_last_status();
    st = read_scalar(need_key(sv, "t"), "t", &s->t);
    const pt_value *pl = get_key(sv, "prev_loss");
    if (st == PT_OK && pl && !pt_value_is(pl, PT_VALUE_NONE))
        st = read_scalar(pl, "prev_loss", &s->prev_loss);
    const pt_value *h = st == PT_OK ? need_key(sv, "H_diag") : NULL;
    s->h_diag_is_one = pt_value_is(h, PT_VALUE_INT);
    if (st == PT_OK)
        st = read_scalar(h, "H_diag", &s->h_diag);
    if (st == PT_OK)
        st = read_history(s, sv);
    return st;
}

static pt_status lbfgs_load(pt_optim *o, int group, int i, const pt_value *sv)
{
    if (group != 0 || i != 0)
        return PT_OK;
    lbfgs_state *s = o->impl;
    lbfgs_state ns = {.n = s->n, .f32 = s->f32};
    pt_status st = PT_OK;
    if (sv && !pt_value_is(sv, PT_VALUE_DICT))
        st = pti_error(PT_ERR_FORMAT, "%s: LBFGS state must be a dict", LOP);
    else if (sv)
        st = read_state(&ns, sv, (int)((const pt_lbfgs_opts *)o->groups[0].opts)->history_size);
    if (st != PT_OK) {
        lbfgs_state_clear(&ns);
        return st;
    }
    lbfgs_state_clear(s);
    *s = ns;
    return PT_OK;
}

static const pti_optim_def lbfgs_def = {
    .name = "LBFGS",
    .opts_size = sizeof(pt_lbfgs_opts),
    .n_hparams = (int)(sizeof(lbfgs_hparams) / sizeof(lbfgs_hparams[0])),
    .hparams = lbfgs_hparams,
    .n_state = 0,
    .state = NULL,
    .check_opts = lbfgs_check,
    .init_state = lbfgs_init,
    .step = lbfgs_step,
    .free_impl = lbfgs_free_impl,
    .save_param_state = lbfgs_save,
    .load_param_state = lbfgs_load,
};

/* Fixes max_eval (None: max_iter * 5 / 4, as torch's constructor) and the line search name
 * (a static string, so the options never point to caller memory). */
static pt_lbfgs_opts normalize(pt_lbfgs_opts o)
{
    if (o.max_eval < 0)
        o.max_eval = o.max_iter * 5 / 4;
    if (o.line_search_fn && strcmp(o.line_search_fn, STRONG_WOLFE) == 0)
        o.line_search_fn = STRONG_WOLFE;
    return o;
}

static pt_optim *attach_state(pt_optim *o)
{
    if (!o)
        return NULL;
    lbfgs_state *s = pti_calloc(1, sizeof(*s));
    if (!s) {
        pt_optim_free(o);
        return pti_error_null(PT_ERR_OOM, "pt_optim_lbfgs: out of memory");
    }
    for (int i = 0; i < o->groups[0].n; i++)
        s->n += pt_numel(o->groups[0].params[i]);
    s->f32 = pt_dtype_of(o->groups[0].params[0]) == PT_FLOAT32;
    o->impl = s;
    return o;
}

pt_optim *pt_optim_lbfgs(pt_module *m, pt_lbfgs_opts o)
{
    o = normalize(o);
    return attach_state(pti_optim_new_module(&lbfgs_def, "pt_optim_lbfgs", m, &o));
}

pt_optim *pt_optim_lbfgs_params(int n, pt_tensor *const *params, pt_lbfgs_opts o)
{
    o = normalize(o);
    return attach_state(pti_optim_new(&lbfgs_def, "pt_optim_lbfgs", n, params, &o));
}
