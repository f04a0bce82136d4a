/*
 * ngx_http_bloomguard_module: nginx checks an ID against a bloomguard filter
 * in its own worker, through libbloomguard's mapping of the filter the
 * daemon publishes, and answers 404 for an ID that surely does not exist
 * without asking anyone: no subrequest, no HTTP exchange with bloomguard.
 * Every other answer (maybe, degraded, no filter) lets the request go on:
 * it fails open.  It runs after nginx's access checks (deny, auth_basic,
 * auth_request) and limit_req by default, so that they guard the existence
 * answer too; bloomguard_phase preaccess runs it before them.  Each worker
 * opens the filters itself: the master only checks them while it reads
 * the configuration, so it never keeps an old generation mapped (a deleted
 * file pinned in tmpfs).  docs/zerohop.md has the directives; conf/nginx/
 * has an example.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <bloomguard.h>

#include "idcodec.h"

/* One bloomguard_filter: a name, a path, the handle (each worker's own, from init_process). */
typedef struct {
    ngx_str_t name;
    ngx_str_t path;
    bloomguard *bg;                     /* NULL in the master, and in a worker that could not open it */
    /* This worker's last logged state (an enum bloomguard_answer class): log changes only. */
    ngx_int_t logged;
} ngx_http_bloomguard_filter_t;

/* bloomguard_phase: where the check runs. */
enum { BG_PHASE_PRECONTENT = 0, BG_PHASE_PREACCESS };
static ngx_conf_enum_t ngx_http_bloomguard_phases[] = {
    { ngx_string("precontent"), BG_PHASE_PRECONTENT },
    { ngx_string("preaccess"), BG_PHASE_PREACCESS },
    { ngx_null_string, 0 }
};

typedef struct {
    ngx_array_t filters;                /* of ngx_http_bloomguard_filter_t */
    ngx_uint_t phase;                   /* bloomguard_phase */
} ngx_http_bloomguard_main_conf_t;

typedef struct {
    ngx_int_t filter;                   /* index into filters; -1 = off; NGX_CONF_UNSET: inherit */
    ngx_http_complex_value_t *id;       /* the ID's bytes */
    ngx_flag_t urlencoded;              /* percent-decode them first (as GET /exists does) */
    ngx_int_t miss_status;              /* bloomguard_miss_status */
    ngx_flag_t miss_json;               /* bloomguard_miss_json */
} ngx_http_bloomguard_loc_conf_t;

/* What the check said, for $bloomguard. */
enum { BG_BYPASS = 0, BG_HIT, BG_MISS, BG_DEGRADED };
static ngx_str_t ngx_http_bloomguard_verdicts[] = {
    ngx_string("bypass"), ngx_string("hit"), ngx_string("miss"), ngx_string("degraded")
};

typedef struct {
    ngx_uint_t verdict;
} ngx_http_bloomguard_ctx_t;

/* States logged once per worker and filter. */
enum { LOGGED_NONE = 0, LOGGED_OK, LOGGED_NOT_READY, LOGGED_DEGRADED };

static ngx_int_t ngx_http_bloomguard_init(ngx_conf_t *cf);
static ngx_int_t ngx_http_bloomguard_add_variables(ngx_conf_t *cf);
static void *ngx_http_bloomguard_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_bloomguard_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_bloomguard_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *ngx_http_bloomguard_filter(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_bloomguard_check(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t ngx_http_bloomguard_init_process(ngx_cycle_t *cycle);
static void ngx_http_bloomguard_exit_process(ngx_cycle_t *cycle);

static ngx_conf_num_bounds_t ngx_http_bloomguard_status_bounds = {
    ngx_conf_check_num_bounds, 400, 599
};

static ngx_command_t ngx_http_bloomguard_commands[] = {
    { ngx_string("bloomguard_filter"),
      NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE2,
      ngx_http_bloomguard_filter,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },
    { ngx_string("bloomguard_check"),
      NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE123,
      ngx_http_bloomguard_check,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },
    { ngx_string("bloomguard_miss_status"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_bloomguard_loc_conf_t, miss_status),
      &ngx_http_bloomguard_status_bounds },
    { ngx_string("bloomguard_phase"),
      NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_bloomguard_main_conf_t, phase),
      &ngx_http_bloomguard_phases },
    { ngx_string("bloomguard_miss_json"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_bloomguard_loc_conf_t, miss_json),
      NULL },
    ngx_null_command
};

static ngx_http_module_t ngx_http_bloomguard_module_ctx = {
    ngx_http_bloomguard_add_variables,      /* preconfiguration */
    ngx_http_bloomguard_init,               /* postconfiguration */
    ngx_http_bloomguard_create_main_conf,   /* create main configuration */
    NULL,                                   /* init main configuration */
    NULL,                                   /* create server configuration */
    NULL,                                   /* merge server configuration */
    ngx_http_bloomguard_create_loc_conf,    /* create location configuration */
    ngx_http_bloomguard_merge_loc_conf      /* merge location configuration */
};

ngx_module_t ngx_http_bloomguard_module = {
    NGX_MODULE_V1,
    &ngx_http_bloomguard_module_ctx,
    ngx_http_bloomguard_commands,
    NGX_HTTP_MODULE,
    NULL,                                   /* init master */
    NULL,                                   /* init module */
    ngx_http_bloomguard_init_process,       /* init process */
    NULL,                                   /* init thread */
    NULL,                                   /* exit thread */
    ngx_http_bloomguard_exit_process,       /* exit process */
    NULL,                                   /* exit master */
    NGX_MODULE_V1_PADDING
};

/* ---------------------------------------------------------- configuration -- */

static void *ngx_http_bloomguard_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_bloomguard_main_conf_t *mcf = ngx_pcalloc(cf->pool, sizeof(*mcf));
    if (mcf == NULL
        || ngx_array_init(&mcf->filters, cf->pool, 4, sizeof(ngx_http_bloomguard_filter_t))
           != NGX_OK)
        return NULL;
    mcf->phase = NGX_CONF_UNSET_UINT;
    return mcf;
}

static void *ngx_http_bloomguard_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_bloomguard_loc_conf_t *lcf = ngx_pcalloc(cf->pool, sizeof(*lcf));
    if (lcf == NULL)
        return NULL;
    lcf->filter = NGX_CONF_UNSET;
    lcf->urlencoded = NGX_CONF_UNSET;
    lcf->miss_status = NGX_CONF_UNSET;
    lcf->miss_json = NGX_CONF_UNSET;
    return lcf;
}

static char *ngx_http_bloomguard_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_bloomguard_loc_conf_t *prev = parent, *conf = child;
    (void)cf;
    if (conf->filter == NGX_CONF_UNSET) {
        conf->filter = prev->filter == NGX_CONF_UNSET ? -1 : prev->filter;
        conf->id = prev->id;
        conf->urlencoded = prev->urlencoded;
    }
    ngx_conf_merge_value(conf->urlencoded, prev->urlencoded, 0);
    ngx_conf_merge_value(conf->miss_status, prev->miss_status, NGX_HTTP_NOT_FOUND);
    ngx_conf_merge_value(conf->miss_json, prev->miss_json, 1);
    return NGX_CONF_OK;
}

/* bloomguard_filter NAME PATH; */
static char *ngx_http_bloomguard_filter(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_bloomguard_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_http_bloomguard_filter_t *f = mcf->filters.elts;
    (void)cmd;
    for (ngx_uint_t i = 0; i < mcf->filters.nelts; i++)
        if (f[i].name.len == value[1].len
            && ngx_strncmp(f[i].name.data, value[1].data, value[1].len) == 0)
            return "names a filter twice";
    if (value[2].len == 0 || value[2].data[0] != '/') {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "bloomguard_filter %V: the path \"%V\" must be "
                           "absolute (e.g. /run/bloomguard/%V.bgf)", &value[1], &value[2],
                           &value[1]);
        return NGX_CONF_ERROR;
    }
    /* A C string for the library; the configuration's pool keeps it. */
    u_char *path = ngx_pnalloc(cf->pool, value[2].len + 1);
    if (path == NULL)
        return NGX_CONF_ERROR;
    ngx_memcpy(path, value[2].data, value[2].len);
    path[value[2].len] = '\0';
    /*
     * Checked now (nginx -t reports it), then closed: each worker maps the
     * file itself (init_process), so the master, which never looks up,
     * never keeps a generation the daemon has since replaced.  Opening
     * never blocks, whatever is at the path (a FIFO).
     */
    int err = 0;
    bloomguard *bg = bloomguard_open((const char *)path, BLOOMGUARD_OPEN_MISSING_OK, &err);
    if (bg == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "bloomguard_filter %V: \"%s\": %s", &value[1],
                           path, bloomguard_strerror(err));
        return NGX_CONF_ERROR;
    }
    struct bloomguard_info in;
    if (bloomguard_info(bg, &in) != BLOOMGUARD_OK)
        /* bloomguard may start after nginx: not an error, but say what will happen. */
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0, "bloomguard_filter %V: no usable filter at "
                           "\"%s\" yet (%s); requests pass unchecked until bloomguard publishes "
                           "it", &value[1], path, in.why);
    bloomguard_close(bg);
    f = ngx_array_push(&mcf->filters);
    if (f == NULL)
        return NGX_CONF_ERROR;
    f->name = value[1];
    f->path.data = path;
    f->path.len = value[2].len;
    f->bg = NULL;
    f->logged = LOGGED_NONE;
    return NGX_CONF_OK;
}

/* bloomguard_check NAME VALUE [urlencoded]; | bloomguard_check off; */
static char *ngx_http_bloomguard_check(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_bloomguard_loc_conf_t *lcf = conf;
    ngx_str_t *value = cf->args->elts;
    (void)cmd;
    if (lcf->filter != NGX_CONF_UNSET)
        return "is duplicate";
    if (cf->args->nelts == 2) {
        if (ngx_strcmp(value[1].data, "off") != 0)
            return "takes a filter's name and the ID (e.g. bloomguard_check users $1), or off";
        lcf->filter = -1;
        return NGX_CONF_OK;
    }
    ngx_http_bloomguard_main_conf_t *mcf =
        ngx_http_conf_get_module_main_conf(cf, ngx_http_bloomguard_module);
    ngx_http_bloomguard_filter_t *f = mcf->filters.elts;
    ngx_int_t found = -1;
    for (ngx_uint_t i = 0; i < mcf->filters.nelts; i++)
        if (f[i].name.len == value[1].len
            && ngx_strncmp(f[i].name.data, value[1].data, value[1].len) == 0)
            found = (ngx_int_t)i;
    if (found < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "bloomguard_check: no bloomguard_filter named "
                           "\"%V\" (declare it at http level, before the servers)", &value[1]);
        return NGX_CONF_ERROR;
    }
    if (cf->args->nelts == 4) {
        if (ngx_strcmp(value[3].data, "urlencoded") != 0)
            return "takes \"urlencoded\" as its third parameter, or none";
        lcf->urlencoded = 1;
    }
    ngx_http_compile_complex_value_t ccv;
    lcf->id = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
    if (lcf->id == NULL)
        return NGX_CONF_ERROR;
    ngx_memzero(&ccv, sizeof(ccv));
    ccv.cf = cf;
    ccv.value = &value[2];
    ccv.complex_value = lcf->id;
    if (ngx_http_compile_complex_value(&ccv) != NGX_OK)
        return NGX_CONF_ERROR;
    lcf->filter = found;
    return NGX_CONF_OK;
}

/* --------------------------------------------------------------- requests -- */

/* State changes of a filter, logged once per worker (never one line per request). */
static void ngx_http_bloomguard_note(ngx_http_request_t *r, ngx_http_bloomguard_filter_t *f,
                                     ngx_int_t state)
{
    if (f->logged == state)
        return;
    ngx_int_t was = f->logged;
    f->logged = state;
    struct bloomguard_info in;
    if (state == LOGGED_NOT_READY) {
        if (f->bg == NULL) {
            ngx_memzero(&in, sizeof(in));
            ngx_cpystrn((u_char *)in.why, (u_char *)"this worker could not open it",
                        sizeof(in.why));
        } else {
            bloomguard_info(f->bg, &in);
        }
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "bloomguard filter \"%V\": no usable "
                      "filter at \"%V\" (%s): requests pass unchecked until there is",
                      &f->name, &f->path, in.why);
    } else if (state == LOGGED_DEGRADED) {
        bloomguard_info(f->bg, &in);
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0, "bloomguard filter \"%V\" is degraded "
                      "(horizon %.1f s old, max_staleness %.1f s%s): requests pass unchecked",
                      &f->name, in.horizon_age, in.max_staleness,
                      in.saturated ? ", saturated" : "");
    } else if (was != LOGGED_NONE) {
        ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0, "bloomguard filter \"%V\" at "
                      "\"%V\" answers again", &f->name, &f->path);
    }
}

/* The miss: {"id":"<escaped>","exists":false}, the body of bloomguard's GET /exists. */
static ngx_int_t ngx_http_bloomguard_miss(ngx_http_request_t *r,
                                          ngx_http_bloomguard_loc_conf_t *lcf,
                                          const u_char *id, size_t len)
{
    if (!lcf->miss_json)
        return lcf->miss_status;          /* nginx's own page, or the error_page for it */
    static const char head[] = "{\"id\":\"", tail[] = "\",\"exists\":false}";
    size_t cap = sizeof head + 6 * len + sizeof tail, used = sizeof head - 1;
    u_char *body = ngx_pnalloc(r->pool, cap);
    if (body == NULL)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    ngx_memcpy(body, head, used);
    if (!json_escape_append((char *)body, cap, &used, (const char *)id, len))
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    ngx_memcpy(body + used, tail, sizeof tail - 1);
    used += sizeof tail - 1;
    ngx_http_complex_value_t cv;
    ngx_memzero(&cv, sizeof(cv));
    cv.value.data = body;
    cv.value.len = used;
    ngx_str_t type = ngx_string("application/json");
    /* A phase handler's NGX_OK would mean "go on": finish the request here instead. */
    ngx_http_finalize_request(r, ngx_http_send_response(r, (ngx_uint_t)lcf->miss_status, &type,
                                                        &cv));
    return NGX_DONE;
}

static ngx_int_t ngx_http_bloomguard_handler(ngx_http_request_t *r)
{
    ngx_http_bloomguard_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_bloomguard_module);
    if (lcf->filter < 0 || ngx_http_get_module_ctx(r, ngx_http_bloomguard_module) != NULL)
        return NGX_DECLINED;
    ngx_http_bloomguard_ctx_t *ctx = ngx_pcalloc(r->pool, sizeof(*ctx));
    if (ctx == NULL)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    ctx->verdict = BG_BYPASS;
    ngx_http_set_ctx(r, ctx, ngx_http_bloomguard_module);

    ngx_str_t id;
    if (ngx_http_complex_value(r, lcf->id, &id) != NGX_OK)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    /* No ID (the map or the capture matched nothing): nothing to check. */
    if (id.len == 0)
        return NGX_DECLINED;
    /*
     * Without a '%' the decoded ID is the ID itself, and what id_decode
     * would refuse in it (a NUL, not UTF-8) bloomguard_lookup refuses too
     * (BLOOMGUARD_INVALID: declined alike): no copy, no second pass over
     * it.  The usual numeric or UUID ID takes this way.
     */
    if (lcf->urlencoded && ngx_strlchr(id.data, id.data + id.len, '%') != NULL) {
        u_char *dec = ngx_pnalloc(r->pool, id.len + 1);
        size_t dlen = 0;
        if (dec == NULL)
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        /* What GET /exists refuses (a bad escape, NUL, not UTF-8) is not checked: the service decides. */
        if (id_decode((const char *)id.data, id.len, id.len, (char *)dec, id.len + 1, &dlen)
            != ID_OK)
            return NGX_DECLINED;
        id.data = dec;
        id.len = dlen;
    }
    ngx_http_bloomguard_main_conf_t *mcf =
        ngx_http_get_module_main_conf(r, ngx_http_bloomguard_module);
    ngx_http_bloomguard_filter_t *f = (ngx_http_bloomguard_filter_t *)mcf->filters.elts + lcf->filter;
    switch (f->bg != NULL ? bloomguard_lookup(f->bg, id.data, id.len) : BLOOMGUARD_NOT_READY) {
    case BLOOMGUARD_ABSENT:
        ngx_http_bloomguard_note(r, f, LOGGED_OK);
        ctx->verdict = BG_MISS;
        return ngx_http_bloomguard_miss(r, lcf, id.data, id.len);
    case BLOOMGUARD_MAYBE:
        ngx_http_bloomguard_note(r, f, LOGGED_OK);
        ctx->verdict = BG_HIT;
        return NGX_DECLINED;
    case BLOOMGUARD_DEGRADED:
        ngx_http_bloomguard_note(r, f, LOGGED_DEGRADED);
        ctx->verdict = BG_DEGRADED;
        return NGX_DECLINED;
    case BLOOMGUARD_INVALID:
        /* An ID GET /exists would refuse (longer than the daemon's max_id_bytes, ...): the service decides. */
        return NGX_DECLINED;
    case BLOOMGUARD_NOT_READY:
    default:
        ngx_http_bloomguard_note(r, f, LOGGED_NOT_READY);
        return NGX_DECLINED;
    }
}

/* $bloomguard: hit, miss, degraded, or bypass (no check ran, or it could not answer). */
static ngx_int_t ngx_http_bloomguard_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
                                              uintptr_t data)
{
    (void)data;
    ngx_http_bloomguard_ctx_t *ctx = ngx_http_get_module_ctx(r->main, ngx_http_bloomguard_module);
    ngx_str_t *s = &ngx_http_bloomguard_verdicts[ctx ? ctx->verdict : BG_BYPASS];
    v->data = s->data;
    v->len = s->len;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
    return NGX_OK;
}

static ngx_int_t ngx_http_bloomguard_add_variables(ngx_conf_t *cf)
{
    ngx_str_t name = ngx_string("bloomguard");
    /*
     * Changeable: the auth_request example (conf/nginx/bloomguard.conf) sets
     * a $bloomguard of its own with auth_request_set, and both may live in
     * one nginx.  Cacheable: a value set that way stays; here it is read
     * after the check (headers, logs), never before.
     */
    ngx_http_variable_t *var = ngx_http_add_variable(cf, &name, NGX_HTTP_VAR_CHANGEABLE);
    if (var == NULL)
        return NGX_ERROR;
    var->get_handler = ngx_http_bloomguard_variable;
    return NGX_OK;
}

static ngx_int_t ngx_http_bloomguard_init(ngx_conf_t *cf)
{
    ngx_http_core_main_conf_t *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    ngx_http_bloomguard_main_conf_t *mcf =
        ngx_http_conf_get_module_main_conf(cf, ngx_http_bloomguard_module);
    ngx_conf_init_uint_value(mcf->phase, BG_PHASE_PRECONTENT);
    /*
     * precontent (the default): after the access phase, so that deny,
     * auth_basic and auth_request (and limit_req and limit_conn, in
     * preaccess) refuse a client before it learns whether an ID exists;
     * the access phase itself would not do, since under "satisfy any" a
     * handler there runs after a refusal that a later one may overturn.
     * preaccess: after the location's rewrite directives ("set",
     * "return"), before limit_req (a later module runs first in its
     * phase), the access checks and the proxy, so an absent ID costs
     * nothing else, but answers anyone who asks.
     */
    ngx_uint_t phase = mcf->phase == BG_PHASE_PREACCESS ? NGX_HTTP_PREACCESS_PHASE
                                                        : NGX_HTTP_PRECONTENT_PHASE;
    ngx_http_handler_pt *h = ngx_array_push(&cmcf->phases[phase].handlers);
    if (h == NULL)
        return NGX_ERROR;
    *h = ngx_http_bloomguard_handler;
    return NGX_OK;
}

/* Each worker maps the filters itself (the master does not: see bloomguard_filter). */
static ngx_int_t ngx_http_bloomguard_init_process(ngx_cycle_t *cycle)
{
    if (ngx_process != NGX_PROCESS_WORKER && ngx_process != NGX_PROCESS_SINGLE)
        return NGX_OK;                  /* the cache manager and loader never look up */
    ngx_http_bloomguard_main_conf_t *mcf =
        ngx_http_cycle_get_module_main_conf(cycle, ngx_http_bloomguard_module);
    if (mcf == NULL)
        return NGX_OK;
    ngx_http_bloomguard_filter_t *f = mcf->filters.elts;
    for (ngx_uint_t i = 0; i < mcf->filters.nelts; i++) {
        int err = 0;
        f[i].bg = bloomguard_open((const char *)f[i].path.data, BLOOMGUARD_OPEN_MISSING_OK, &err);
        /* Not fatal: the filter is bypassed (the file changed since nginx -t). */
        if (f[i].bg == NULL)
            ngx_log_error(NGX_LOG_ERR, cycle->log, 0, "bloomguard filter \"%V\": \"%V\": %s; "
                          "requests pass unchecked", &f[i].name, &f[i].path,
                          bloomguard_strerror(err));
    }
    return NGX_OK;
}

static void ngx_http_bloomguard_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_bloomguard_main_conf_t *mcf =
        ngx_http_cycle_get_module_main_conf(cycle, ngx_http_bloomguard_module);
    if (mcf == NULL)
        return;
    ngx_http_bloomguard_filter_t *f = mcf->filters.elts;
    for (ngx_uint_t i = 0; i < mcf->filters.nelts; i++) {
        bloomguard_close(f[i].bg);
        f[i].bg = NULL;
    }
}
