/* Request JSON -> generation parameters (api_request.h): Ollama options, keep_alive, format,
 * messages and tools, and OpenAI's /v1 fields mapped onto them. */
#include "api_request.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"

/* ---- options ------------------------------------------------------------------------------ */

typedef enum opt_kind { OPT_FLOAT, OPT_INT, OPT_BOOL, OPT_STOP } opt_kind;

typedef struct opt_def {
    const char *key;
    opt_kind kind;
    double lo, hi; /* inclusive range of numbers */
    bool used;     /* false: accepted (type-checked) and ignored, as load-time GPU options */
} opt_def;

#define I32MAX 2147483647.0
#define I64LIM 9223372036854775807.0 /* rounds to 2^63 in a double */

static const opt_def option_defs[] = {
    {"temperature", OPT_FLOAT, 0, 1e4, true},
    {"top_k", OPT_INT, -I32MAX, I32MAX, true},
    {"top_p", OPT_FLOAT, 0, 1, true},
    {"min_p", OPT_FLOAT, 0, 1, true},
    {"typical_p", OPT_FLOAT, 0, 1, true},
    {"num_predict", OPT_INT, -2, I32MAX, true},
    {"stop", OPT_STOP, 0, 0, true},
    {"seed", OPT_INT, -I64LIM, I64LIM, true},
    {"repeat_penalty", OPT_FLOAT, 0, 1e4, true},
    {"repeat_last_n", OPT_INT, -1, I32MAX, true},
    {"presence_penalty", OPT_FLOAT, -1e4, 1e4, true},
    {"frequency_penalty", OPT_FLOAT, -1e4, 1e4, true},
    {"num_ctx", OPT_INT, 0, PTI_API_MAX_CTX, true},
    {"num_thread", OPT_INT, 0, 4096, true},
    {"num_batch", OPT_INT, 0, I32MAX, true},
    {"num_keep", OPT_INT, -1, I32MAX, true},
    /* known to Ollama, meaningless here (GPU offload, memory mapping, removed samplers) */
    {"num_gpu", OPT_INT, -I32MAX, I32MAX, false},
    {"main_gpu", OPT_INT, -I32MAX, I32MAX, false},
    {"draft_num_predict", OPT_INT, -I32MAX, I32MAX, false},
    {"mirostat", OPT_INT, -I32MAX, I32MAX, false},
    {"mirostat_tau", OPT_FLOAT, -1e30, 1e30, false},
    {"mirostat_eta", OPT_FLOAT, -1e30, 1e30, false},
    {"tfs_z", OPT_FLOAT, -1e30, 1e30, false},
    {"use_mmap", OPT_BOOL, 0, 0, false},
    {"use_mlock", OPT_BOOL, 0, 0, false},
    {"numa", OPT_BOOL, 0, 0, false},
    {"low_vram", OPT_BOOL, 0, 0, false},
    {"f16_kv", OPT_BOOL, 0, 0, false},
    {"logits_all", OPT_BOOL, 0, 0, false},
    {"vocab_only", OPT_BOOL, 0, 0, false},
    {"embedding_only", OPT_BOOL, 0, 0, false},
    {"penalize_newline", OPT_BOOL, 0, 0, false},
};

void pti_api_opts_init(pti_api_opts *o)
{
    memset(o, 0, sizeof *o);
    o->gen = pt_gen_opts_default();
}

static void free_stop(pti_api_opts *o)
{
    for (int32_t i = 0; i < o->n_stop; i++)
        free(o->stop[i]);
    free(o->stop);
    o->stop = NULL;
    o->n_stop = 0;
    o->gen.stop = NULL;
    o->gen.n_stop = 0;
}

void pti_api_opts_free(pti_api_opts *o)
{
    if (o)
        free_stop(o);
}

static const opt_def *find_option(const char *key)
{
    for (size_t i = 0; i < sizeof option_defs / sizeof option_defs[0]; i++)
        if (strcmp(option_defs[i].key, key) == 0)
            return &option_defs[i];
    return NULL;
}

/* A list of strings replaces the stop strings (as Ollama's FromMap replaces the field). */
static pt_status set_stop(pti_api_opts *o, const char *what, const cJSON *v)
{
    if (!cJSON_IsArray(v))
        return pti_error(PT_ERR_INVALID_ARG, "%s must be an array of strings", what);
    int n = cJSON_GetArraySize(v);
    if (n > PTI_API_MAX_STOP)
        return pti_error(PT_ERR_INVALID_ARG, "%s has %d strings, at most %d are allowed", what, n,
                         PTI_API_MAX_STOP);
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
    {
        if (!cJSON_IsString(e))
            return pti_error(PT_ERR_INVALID_ARG, "%s must be an array of strings", what);
        size_t len = strlen(e->valuestring);
        if (len == 0 || len > PTI_API_MAX_STOP_LEN)
            return pti_error(PT_ERR_INVALID_ARG, "%s: a stop string must have 1 to %d bytes", what,
                             PTI_API_MAX_STOP_LEN);
    }
    char **list = pti_calloc((size_t)(n > 0 ? n : 1), sizeof *list);
    if (!list)
        return PT_ERR_OOM;
    int k = 0;
    cJSON_ArrayForEach(e, v)
    {
        list[k] = pti_strdup(e->valuestring);
        if (!list[k]) {
            for (int i = 0; i < k; i++)
                free(list[i]);
            free(list);
            return pti_error(PT_ERR_OOM, "out of memory");
        }
        k++;
    }
    free_stop(o);
    o->stop = list;
    o->n_stop = n;
    o->gen.stop = (const char *const *)list;
    o->gen.n_stop = n;
    return PT_OK;
}

/* Checks a number against the option's type and range. */
static pt_status check_number(const opt_def *d, const cJSON *v, double *out)
{
    if (!cJSON_IsNumber(v))
        return pti_error(PT_ERR_INVALID_ARG, "option \"%s\" must be %s", d->key,
                         d->kind == OPT_INT ? "an integer" : "a number");
    double x = v->valuedouble;
    if (d->kind == OPT_INT && x != floor(x))
        return pti_error(PT_ERR_INVALID_ARG, "option \"%s\" must be an integer", d->key);
    if (!(x >= d->lo && x <= d->hi) || (d->kind == OPT_INT && x >= I64LIM))
        return pti_error(PT_ERR_INVALID_ARG, "option \"%s\" is out of range [%.17g, %.17g]", d->key,
                         d->lo, d->hi);
    *out = x;
    return PT_OK;
}

static void set_number(pti_api_opts *o, const char *key, double x)
{
    pt_gen_opts *g = &o->gen;
    if (!strcmp(key, "temperature"))
        g->temperature = (float)x;
    else if (!strcmp(key, "top_k"))
        g->top_k = (int32_t)x;
    else if (!strcmp(key, "top_p"))
        g->top_p = (float)x;
    else if (!strcmp(key, "min_p"))
        g->min_p = (float)x;
    else if (!strcmp(key, "typical_p"))
        g->typical_p = (float)x;
    else if (!strcmp(key, "num_predict"))
        g->num_predict = x < 0 ? -1 : (int32_t)x; /* -2 (fill the context) is -1 here */
    else if (!strcmp(key, "seed"))
        g->seed = (int64_t)x;
    else if (!strcmp(key, "repeat_penalty"))
        g->repeat_penalty = (float)x;
    else if (!strcmp(key, "repeat_last_n"))
        g->repeat_last_n = (int32_t)x;
    else if (!strcmp(key, "presence_penalty"))
        g->presence_penalty = (float)x;
    else if (!strcmp(key, "frequency_penalty"))
        g->frequency_penalty = (float)x;
    else if (!strcmp(key, "num_ctx"))
        o->num_ctx = (int32_t)x;
    else if (!strcmp(key, "num_thread"))
        o->num_thread = (int32_t)x;
    else if (!strcmp(key, "num_batch"))
        o->num_batch = (int32_t)x;
    else if (!strcmp(key, "num_keep"))
        o->num_keep = (int32_t)x;
}

static void note_unknown(pti_api_opts *o, const char *key)
{
    size_t used = strlen(o->unknown);
    if (used + strlen(key) + 3 >= sizeof o->unknown)
        return;
    snprintf(o->unknown + used, sizeof o->unknown - used, "%s%s", used ? ", " : "", key);
}

pt_status pti_api_apply_options(pti_api_opts *o, const cJSON *options)
{
    if (!options || cJSON_IsNull(options))
        return PT_OK;
    if (!cJSON_IsObject(options))
        return pti_error(PT_ERR_INVALID_ARG, "options must be an object");
    const cJSON *v;
    cJSON_ArrayForEach(v, options)
    {
        const char *key = v->string ? v->string : "";
        const opt_def *d = find_option(key);
        if (!d) {
            note_unknown(o, key);
            continue;
        }
        if (cJSON_IsNull(v))
            continue; /* Go leaves the default for a null */
        if (d->kind == OPT_STOP) {
            char what[64];
            snprintf(what, sizeof what, "option \"%s\"", d->key);
            pt_status st = set_stop(o, what, v);
            if (st != PT_OK)
                return st;
        } else if (d->kind == OPT_BOOL) {
            if (!cJSON_IsBool(v))
                return pti_error(PT_ERR_INVALID_ARG, "option \"%s\" must be a boolean", d->key);
        } else {
            double x = 0;
            pt_status st = check_number(d, v, &x);
            if (st != PT_OK)
                return st;
            if (d->used)
                set_number(o, d->key, x);
        }
    }
    return PT_OK;
}

/* ---- keep_alive and Go durations ------------------------------------------------------------ */

static int64_t unit_ns(const char *u, size_t n)
{
    static const struct {
        const char *name;
        int64_t ns;
    } units[] = {{"ns", 1},
                 {"us", 1000},
                 {"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
                 {"\xce\xbcs", 1000}, /* U+03BC Greek mu */
                 {"ms", 1000000},
                 {"s", 1000000000},
                 {"m", 60LL * 1000000000},
                 {"h", 3600LL * 1000000000}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strlen(units[i].name) == n && memcmp(units[i].name, u, n) == 0)
            return units[i].ns;
    return 0;
}

pt_status pti_go_duration(const char *s, int64_t *ns)
{
    const char *p = s;
    bool neg = false;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    if (strcmp(p, "0") == 0) {
        *ns = 0;
        return PT_OK;
    }
    if (*p == '\0')
        return pti_error(PT_ERR_INVALID_ARG, "time: invalid duration \"%s\"", s);
    double total = 0; /* exact for every value that fits below 2^53 ns (104 days) */
    while (*p) {
        double whole = 0, frac = 0, scale = 1;
        bool digits = false;
        while (*p >= '0' && *p <= '9') {
            whole = whole * 10 + (*p++ - '0');
            digits = true;
        }
        if (*p == '.') {
            p++;
            while (*p >= '0' && *p <= '9') {
                scale /= 10;
                frac += (*p++ - '0') * scale;
                digits = true;
            }
        }
        if (!digits)
            return pti_error(PT_ERR_INVALID_ARG, "time: invalid duration \"%s\"", s);
        const char *u = p;
        while (*p && *p != '.' && !(*p >= '0' && *p <= '9'))
            p++;
        if (p == u)
            return pti_error(PT_ERR_INVALID_ARG, "time: missing unit in duration \"%s\"", s);
        int64_t unit = unit_ns(u, (size_t)(p - u));
        if (!unit)
            return pti_error(PT_ERR_INVALID_ARG, "time: unknown unit \"%.*s\" in duration \"%s\"",
                             (int)(p - u), u, s);
        total += whole * (double)unit + frac * (double)unit;
        if (total >= I64LIM)
            return pti_error(PT_ERR_INVALID_ARG, "time: invalid duration \"%s\"", s);
    }
    *ns = (int64_t)llround(neg ? -total : total);
    return PT_OK;
}

/* A string that is only a number ("-1", "300", "2.5"): seconds, as a numeric keep_alive. */
static bool plain_number(const char *s, double *out)
{
    if (!*s || isspace((unsigned char)*s))
        return false;
    char *end = NULL;
    double x = strtod(s, &end);
    if (*end != '\0' || !isfinite(x))
        return false;
    for (const char *q = s; *q; q++)
        if (!strchr("+-.0123456789", *q))
            return false; /* no hex, exponents, inf or nan spellings */
    *out = x;
    return true;
}

static int64_t seconds_to_ns(double sec)
{
    if (sec < 0)
        return -1;
    if (sec * 1e9 >= I64LIM)
        return -1; /* longer than int64 nanoseconds (292 years): forever */
    return (int64_t)llround(sec * 1e9);
}

pt_status pti_api_keep_alive(const cJSON *v, int64_t *ns)
{
    if (!v || cJSON_IsNull(v)) {
        *ns = PTI_API_KEEP_DEFAULT;
        return PT_OK;
    }
    if (cJSON_IsNumber(v)) {
        if (!isfinite(v->valuedouble)) /* 1e999: Go's decoder rejects it (out of float64) */
            return pti_error(PT_ERR_INVALID_ARG, "keep_alive: number out of range");
        *ns = seconds_to_ns(v->valuedouble);
        return PT_OK;
    }
    if (!cJSON_IsString(v))
        return pti_error(PT_ERR_INVALID_ARG, "keep_alive must be a number of seconds or a "
                                             "duration string such as \"5m\"");
    double sec;
    if (plain_number(v->valuestring, &sec)) {
        *ns = seconds_to_ns(sec);
        return PT_OK;
    }
    int64_t d = 0;
    pt_status st = pti_go_duration(v->valuestring, &d);
    if (st != PT_OK)
        return st;
    *ns = d < 0 ? -1 : d;
    return PT_OK;
}

/* ---- format---------------------------------------------------------------------------------- */

pt_status pti_api_format(const cJSON *format, pti_api_format_kind *kind, const cJSON **schema)
{
    *kind = PTI_FORMAT_NONE;
    *schema = NULL;
    if (!format || cJSON_IsNull(format))
        return PT_OK;
    if (cJSON_IsString(format)) {
        if (format->valuestring[0] == '\0')
            return PT_OK;
        if (strcmp(format->valuestring, "json") == 0) {
            *kind = PTI_FORMAT_JSON;
            return PT_OK;
        }
    } else if (cJSON_IsObject(format)) {
        *kind = PTI_FORMAT_SCHEMA;
        *schema = format;
        return PT_OK;
    }
    return pti_error(PT_ERR_INVALID_ARG,
                     "invalid format: expected \"json\" or a valid JSON schema");
}

pt_status pti_api_openai_format(const cJSON *rf, pti_api_format_kind *kind, const cJSON **schema)
{
    *kind = PTI_FORMAT_NONE;
    *schema = NULL;
    if (!rf || cJSON_IsNull(rf))
        return PT_OK;
    if (!cJSON_IsObject(rf))
        return pti_error(PT_ERR_INVALID_ARG, "response_format must be an object");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsString(type))
        return pti_error(PT_ERR_INVALID_ARG, "response_format.type must be a string");
    if (strcmp(type->valuestring, "text") == 0)
        return PT_OK;
    if (strcmp(type->valuestring, "json_object") == 0) {
        *kind = PTI_FORMAT_JSON;
        return PT_OK;
    }
    if (strcmp(type->valuestring, "json_schema") == 0) {
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
        const cJSON *s = cJSON_IsObject(js) ? cJSON_GetObjectItemCaseSensitive(js, "schema") : NULL;
        if (!cJSON_IsObject(s))
            return pti_error(PT_ERR_INVALID_ARG,
                             "response_format.json_schema.schema must be a JSON schema object");
        *kind = PTI_FORMAT_SCHEMA;
        *schema = s;
        return PT_OK;
    }
    return pti_error(PT_ERR_INVALID_ARG,
                     "invalid response_format type \"%s\": expected "
                     "\"text\", \"json_object\" or \"json_schema\"",
                     type->valuestring);
}

/* ---- small field readers--------------------------------------------------------------------- */

pt_status pti_api_bool(const cJSON *obj, const char *key, bool def, bool *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = def;
    if (!v || cJSON_IsNull(v))
        return PT_OK;
    if (!cJSON_IsBool(v))
        return pti_error(PT_ERR_INVALID_ARG, "\"%s\" must be a boolean", key);
    *out = cJSON_IsTrue(v);
    return PT_OK;
}

pt_status pti_api_string(const cJSON *obj, const char *key, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v))
        return PT_OK;
    if (!cJSON_IsString(v))
        return pti_error(PT_ERR_INVALID_ARG, "\"%s\" must be a string", key);
    *out = v->valuestring;
    return PT_OK;
}

pt_status pti_api_images(const cJSON *images, const char *what, bool *has_images)
{
    if (!images || cJSON_IsNull(images))
        return PT_OK;
    bool ok = cJSON_IsArray(images);
    const cJSON *e;
    cJSON_ArrayForEach(e, images) ok = ok && cJSON_IsString(e);
    if (!ok)
        return pti_error(PT_ERR_INVALID_ARG, "%s must be an array of base64 strings", what);
    if (cJSON_GetArraySize(images) > 0)
        *has_images = true;
    return PT_OK;
}

/* ---- messages and tools---------------------------------------------------------------------- */

static bool add_string(cJSON *obj, const char *key, const char *s)
{
    return cJSON_AddStringToObject(obj, key, s ? s : "") != NULL;
}

/* Arguments of a tool call as an object: an object is copied, a string is parsed (OpenAI
 * sends JSON text). NULL with the error set otherwise. */
static cJSON *tool_arguments(const cJSON *args, const char *where)
{
    if (!args || cJSON_IsNull(args))
        return cJSON_CreateObject();
    if (cJSON_IsObject(args))
        return cJSON_Duplicate(args, true);
    if (cJSON_IsString(args)) {
        const char *s = args->valuestring;
        if (s[strspn(s, " \t\r\n")] == '\0')
            return cJSON_CreateObject();
        cJSON *parsed = cJSON_Parse(s);
        if (cJSON_IsObject(parsed))
            return parsed;
        cJSON_Delete(parsed);
    }
    return pti_error_null(PT_ERR_INVALID_ARG, "%s.function.arguments must be a JSON object", where);
}

/* [{function:{index, name, arguments:{}}, id?}] from a message's tool_calls. */
static cJSON *normalise_tool_calls(const cJSON *calls, int msg)
{
    char where[64];
    snprintf(where, sizeof where, "messages[%d].tool_calls", msg);
    if (!cJSON_IsArray(calls))
        return pti_error_null(PT_ERR_INVALID_ARG, "%s must be an array", where);
    cJSON *out = cJSON_CreateArray();
    int i = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, calls)
    {
        snprintf(where, sizeof where, "messages[%d].tool_calls[%d]", msg, i);
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsObject(fn) || !cJSON_IsString(name)) {
            cJSON_Delete(out);
            return pti_error_null(PT_ERR_INVALID_ARG, "%s.function.name must be a string", where);
        }
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        const cJSON *index = cJSON_GetObjectItemCaseSensitive(fn, "index");
        bool bad_id = id && !cJSON_IsNull(id) && !cJSON_IsString(id);
        if (bad_id || (index && !cJSON_IsNull(index) &&
                       !(cJSON_IsNumber(index) && index->valuedouble == floor(index->valuedouble) &&
                         fabs(index->valuedouble) < 1e9))) {
            cJSON_Delete(out);
            return pti_error_null(PT_ERR_INVALID_ARG,
                                  bad_id ? "%s.id must be a string"
                                         : "%s.function.index must be an "
                                           "integer",
                                  where);
        }
        cJSON *args = tool_arguments(cJSON_GetObjectItemCaseSensitive(fn, "arguments"), where);
        if (!args) {
            cJSON_Delete(out);
            return NULL;
        }
        cJSON *call = cJSON_CreateObject(), *f = cJSON_CreateObject();
        if (cJSON_IsString(id))
            add_string(call, "id", id->valuestring);
        cJSON_AddNumberToObject(f, "index", cJSON_IsNumber(index) ? index->valuedouble : i);
        add_string(f, "name", name->valuestring);
        cJSON_AddItemToObject(f, "arguments", args);
        cJSON_AddItemToObject(call, "function", f);
        cJSON_AddItemToArray(out, call);
        i++;
    }
    return out;
}

static char *lower_dup(const char *s)
{
    char *d = pti_strdup(s);
    for (char *p = d; p && *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return d;
}

static bool copy_optional_string(cJSON *dst, const cJSON *src, const char *key, int i)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, key);
    if (!v || cJSON_IsNull(v))
        return true;
    if (!cJSON_IsString(v)) {
        pti_error(PT_ERR_INVALID_ARG, "messages[%d].%s must be a string", i, key);
        return false;
    }
    return add_string(dst, key, v->valuestring);
}

/* One Ollama message, normalised. */
static cJSON *ollama_message(const cJSON *m, int i, bool *has_images)
{
    if (!cJSON_IsObject(m))
        return pti_error_null(PT_ERR_INVALID_ARG, "messages[%d] must be an object", i);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(role) || role->valuestring[0] == '\0')
        return pti_error_null(PT_ERR_INVALID_ARG, "messages[%d].role must be a non-empty string",
                              i);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (content && !cJSON_IsNull(content) && !cJSON_IsString(content))
        return pti_error_null(PT_ERR_INVALID_ARG, "messages[%d].content must be a string", i);
    const cJSON *images = cJSON_GetObjectItemCaseSensitive(m, "images");
    char what[48];
    snprintf(what, sizeof what, "messages[%d].images", i);
    if (pti_api_images(images, what, has_images) != PT_OK)
        return NULL;
    cJSON *out = cJSON_CreateObject();
    char *r = lower_dup(role->valuestring);
    bool ok = r && add_string(out, "role", r);
    free(r);
    ok = ok && add_string(out, "content", cJSON_IsString(content) ? content->valuestring : "");
    ok = ok && copy_optional_string(out, m, "thinking", i) &&
         copy_optional_string(out, m, "tool_name", i) &&
         copy_optional_string(out, m, "tool_call_id", i);
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (ok && calls && !cJSON_IsNull(calls)) {
        cJSON *tc = normalise_tool_calls(calls, i);
        ok = tc != NULL;
        if (tc)
            cJSON_AddItemToObject(out, "tool_calls", tc);
    }
    if (!ok) {
        cJSON_Delete(out);
        if (pt_last_status() == PT_OK)
            pti_error(PT_ERR_OOM, "out of memory");
        return NULL;
    }
    return out;
}

static cJSON *convert_messages(const cJSON *messages, bool openai, bool *has_images);

cJSON *pti_api_chat_messages(const cJSON *messages, bool *has_images)
{
    return convert_messages(messages, false, has_images);
}

/* OpenAI content: a string, null, or parts [{type:"text",text}|{type:"image_url",...}]. */
static char *openai_content(const cJSON *content, int i, bool *has_images)
{
    if (!content || cJSON_IsNull(content))
        return pti_strdup("");
    if (cJSON_IsString(content))
        return pti_strdup(content->valuestring);
    if (!cJSON_IsArray(content))
        return pti_error_null(PT_ERR_INVALID_ARG,
                              "messages[%d].content must be a string or an array of parts", i);
    size_t len = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, content)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type))
            return pti_error_null(PT_ERR_INVALID_ARG,
                                  "messages[%d].content: a part needs a "
                                  "string \"type\"",
                                  i);
        if (strcmp(type->valuestring, "image_url") == 0) {
            *has_images = true;
        } else if (strcmp(type->valuestring, "text") == 0) {
            if (!cJSON_IsString(text))
                return pti_error_null(PT_ERR_INVALID_ARG,
                                      "messages[%d].content: a text part "
                                      "needs a string \"text\"",
                                      i);
            len += strlen(text->valuestring);
        } else {
            return pti_error_null(PT_ERR_INVALID_ARG, "invalid message content type: %s",
                                  type->valuestring);
        }
    }
    char *s = pti_malloc(len + 1), *p = s;
    if (!s)
        return NULL;
    cJSON_ArrayForEach(part, content)
    {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (cJSON_IsString(text) &&
            strcmp(cJSON_GetObjectItemCaseSensitive(part, "type")->valuestring, "text") == 0) {
            size_t n = strlen(text->valuestring);
            memcpy(p, text->valuestring, n);
            p += n;
        }
    }
    *p = '\0';
    return s;
}

/* The name of the tool call with this id in the earlier assistant messages (out). */
static const char *call_name_by_id(const cJSON *out, const char *id)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, out)
    {
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(m, "tool_calls"))
        {
            const cJSON *cid = cJSON_GetObjectItemCaseSensitive(c, "id");
            if (cJSON_IsString(cid) && strcmp(cid->valuestring, id) == 0)
                return cJSON_GetObjectItemCaseSensitive(
                           cJSON_GetObjectItemCaseSensitive(c, "function"), "name")
                    ->valuestring;
        }
    }
    return NULL;
}

static cJSON *openai_message(const cJSON *m, int i, const cJSON *done, bool *has_images)
{
    if (!cJSON_IsObject(m))
        return pti_error_null(PT_ERR_INVALID_ARG, "messages[%d] must be an object", i);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(role) || role->valuestring[0] == '\0')
        return pti_error_null(PT_ERR_INVALID_ARG, "messages[%d].role must be a non-empty string",
                              i);
    char *content = openai_content(cJSON_GetObjectItemCaseSensitive(m, "content"), i, has_images);
    if (!content)
        return NULL;
    cJSON *out = cJSON_CreateObject();
    const char *r = strcmp(role->valuestring, "developer") == 0 ? "system" : role->valuestring;
    add_string(out, "role", r);
    add_string(out, "content", content);
    free(content);
    bool ok = copy_optional_string(out, m, "tool_call_id", i);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "name");
    if (ok && name && !cJSON_IsNull(name) && !cJSON_IsString(name)) {
        pti_error(PT_ERR_INVALID_ARG, "messages[%d].name must be a string", i);
        ok = false;
    }
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (ok && calls && !cJSON_IsNull(calls)) {
        cJSON *tc = normalise_tool_calls(calls, i);
        ok = tc != NULL;
        if (tc)
            cJSON_AddItemToObject(out, "tool_calls", tc);
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");
    if (ok && strcmp(r, "tool") == 0) {
        const char *tool = cJSON_IsString(id) ? call_name_by_id(done, id->valuestring) : NULL;
        if (!tool && cJSON_IsString(name))
            tool = name->valuestring;
        if (tool)
            add_string(out, "tool_name", tool);
    }
    if (!ok) {
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

/* Ollama messages from a request's messages array, each converted by the API's own rules
 * (OpenAI's need the messages converted so far: a tool result names its call by id). */
static cJSON *convert_messages(const cJSON *messages, bool openai, bool *has_images)
{
    *has_images = false;
    if (!cJSON_IsArray(messages))
        return pti_error_null(PT_ERR_INVALID_ARG, "messages must be an array");
    cJSON *out = cJSON_CreateArray();
    if (!out)
        return pti_error_null(PT_ERR_OOM, "out of memory");
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages)
    {
        cJSON *n =
            openai ? openai_message(m, i, out, has_images) : ollama_message(m, i, has_images);
        i++;
        if (!n) {
            cJSON_Delete(out);
            return NULL;
        }
        cJSON_AddItemToArray(out, n);
    }
    return out;
}

cJSON *pti_api_openai_messages(const cJSON *messages, bool *has_images)
{
    return convert_messages(messages, true, has_images);
}

pt_status pti_api_tools(const cJSON *tools, int *n)
{
    *n = 0;
    if (!tools || cJSON_IsNull(tools))
        return PT_OK;
    if (!cJSON_IsArray(tools))
        return pti_error(PT_ERR_INVALID_ARG, "tools must be an array");
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsObject(t) ||
            (type && !cJSON_IsNull(type) &&
             !(cJSON_IsString(type) && !strcmp(type->valuestring, "function"))))
            return pti_error(PT_ERR_INVALID_ARG,
                             "tools[%d] must be {\"type\": \"function\", "
                             "\"function\": {...}}",
                             i);
        if (!cJSON_IsObject(fn) || !cJSON_IsString(name) || name->valuestring[0] == '\0')
            return pti_error(PT_ERR_INVALID_ARG,
                             "tools[%d].function.name must be a non-empty "
                             "string",
                             i);
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))
            return pti_error(PT_ERR_INVALID_ARG,
                             "tools[%d].function.parameters must be an "
                             "object",
                             i);
        i++;
    }
    *n = i;
    return PT_OK;
}

/* ---- OpenAI fields -> Ollama options--------------------------------------------------------- */

static bool copy_openai_number(cJSON *opts, const cJSON *req, const char *field, const char *key,
                               double def, bool has_def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, field);
    if (!v || cJSON_IsNull(v)) {
        if (has_def)
            cJSON_AddNumberToObject(opts, key, def);
        return true;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        pti_error(PT_ERR_INVALID_ARG, "\"%s\" must be a number", field);
        return false;
    }
    cJSON_AddNumberToObject(opts, key, v->valuedouble);
    return true;
}

cJSON *pti_api_openai_options(const cJSON *req)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = copy_openai_number(o, req, "temperature", "temperature", 1.0, true) &&
              copy_openai_number(o, req, "top_p", "top_p", 1.0, true) &&
              copy_openai_number(o, req, "seed", "seed", 0, false) &&
              copy_openai_number(o, req, "frequency_penalty", "frequency_penalty", 0, false) &&
              copy_openai_number(o, req, "presence_penalty", "presence_penalty", 0, false);
    const cJSON *mct = cJSON_GetObjectItemCaseSensitive(req, "max_completion_tokens");
    if (ok)
        ok = (mct && !cJSON_IsNull(mct))
                 ? copy_openai_number(o, req, "max_completion_tokens", "num_predict", 0, false)
                 : copy_openai_number(o, req, "max_tokens", "num_predict", 0, false);
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(req, "stop");
    if (ok && stop && !cJSON_IsNull(stop)) {
        if (cJSON_IsString(stop)) {
            cJSON *list = cJSON_AddArrayToObject(o, "stop");
            cJSON_AddItemToArray(list, cJSON_CreateString(stop->valuestring));
        } else if (cJSON_IsArray(stop)) {
            cJSON_AddItemToObject(o, "stop", cJSON_Duplicate(stop, true));
        } else {
            ok = false;
            pti_error(PT_ERR_INVALID_ARG, "\"stop\" must be a string or an array of strings");
        }
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* ---- context--------------------------------------------------------------------------------- */

int32_t *pti_api_context_ids(const cJSON *context, int32_t n_vocab, int32_t *n)
{
    *n = 0;
    if (!context || cJSON_IsNull(context))
        return NULL;
    if (!cJSON_IsArray(context)) {
        *n = -1;
        return pti_error_null(PT_ERR_INVALID_ARG, "context must be an array of token ids");
    }
    int count = cJSON_GetArraySize(context);
    if (count == 0)
        return NULL;
    int32_t *ids = pti_malloc((size_t)count * sizeof *ids);
    if (!ids) {
        *n = -1;
        return NULL;
    }
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, context)
    {
        double x = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (x != floor(x) || x < 0 || x >= n_vocab) {
            free(ids);
            *n = -1;
            return pti_error_null(PT_ERR_INVALID_ARG,
                                  "context[%d] is not a token id of this "
                                  "model (0 to %d)",
                                  i, (int)n_vocab - 1);
        }
        ids[i++] = (int32_t)x;
    }
    *n = count;
    return ids;
}

/* ---- thinking--------------------------------------------------------------------------------- */

enum { THINK_OFF = 0, THINK_AWAIT = 1, THINK_CONTENT = 2, THINK_IN = 3, THINK_AFTER = 4 };

void pti_think_split_init(pti_think_split *t, bool enabled)
{
    memset(t, 0, sizeof *t);
    t->state = enabled ? THINK_AWAIT : THINK_OFF;
}

static bool think_out(pti_think_out out, void *user, bool thinking, const char *s, size_t n)
{
    return n == 0 || out(user, thinking, s, n);
}

/* The longest tail of s[0..n) that is a proper prefix of tag. */
static size_t partial_tag(const char *s, size_t n, const char *tag)
{
    size_t tl = strlen(tag);
    for (size_t k = tl - 1; k > 0; k--)
        if (k <= n && memcmp(s + n - k, tag, k) == 0)
            return k;
    return 0;
}

bool pti_think_split_push(pti_think_split *t, const char *text, size_t len, bool finish,
                          pti_think_out out, void *user)
{
    if (t->state == THINK_AFTER) { /* the newlines after </think> are dropped */
        while (len > 0 && *text == '\n') {
            text++;
            len--;
        }
        if (len > 0)
            t->state = THINK_CONTENT;
    }
    if (t->state == THINK_OFF || t->state == THINK_CONTENT || t->state == THINK_AFTER)
        return think_out(out, user, false, text, len);
    size_t n = t->n_hold + len;
    char *buf = pti_malloc(n + 1);
    if (!buf)
        return false;
    memcpy(buf, t->hold, t->n_hold);
    memcpy(buf + t->n_hold, text, len);
    buf[n] = '\0';
    t->n_hold = 0;
    const char *p = buf;
    size_t rest = n;
    bool ok = true;
    if (t->state == THINK_AWAIT) {
        size_t ws = 0;
        while (ws < rest && strchr(" \t\r\n", p[ws]))
            ws++;
        size_t m = rest - ws < 7 ? rest - ws : 7;
        if (m < 7 && memcmp(p + ws, "<think>", m) == 0 && !finish && n < sizeof t->hold) {
            memcpy(t->hold, buf, n); /* maybe the open tag, still coming */
            t->n_hold = n;
            free(buf);
            return true;
        }
        if (m == 7 && memcmp(p + ws, "<think>", 7) == 0) {
            t->state = THINK_IN;
            p += ws + 7;
            rest -= ws + 7;
        } else {
            t->state = THINK_CONTENT;
            ok = think_out(out, user, false, p, rest);
            free(buf);
            return ok;
        }
    }
    const char *end = NULL;
    for (size_t i = 0; i + 8 <= rest && !end; i++)
        if (memcmp(p + i, "</think>", 8) == 0)
            end = p + i;
    if (end) {
        const char *after = end + 8, *stop = p + rest;
        while (after < stop && *after == '\n')
            after++;
        t->state = after < stop ? THINK_CONTENT : THINK_AFTER;
        ok = think_out(out, user, true, p, (size_t)(end - p)) &&
             think_out(out, user, false, after, (size_t)(stop - after));
    } else {
        size_t hold = finish ? 0 : partial_tag(p, rest, "</think>");
        memcpy(t->hold, p + rest - hold, hold);
        t->n_hold = hold;
        ok = think_out(out, user, true, p, rest - hold);
    }
    free(buf);
    return ok;
}
