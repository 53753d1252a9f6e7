/* Go's encoding/json matches an object's keys to a struct's fields case-insensitively: a key
 * that is not a field's exact name goes to the field whose name it equals under Unicode
 * simple case folding ({"Model": "a"} sets model), and of several keys that reach one field
 * the last wins. Ollama decodes its requests into structs that way, so promeserve renames
 * such keys to the field's exact name right after parsing (ps_json_fold_keys), before
 * ps_json_last_key_wins drops all but the last of each name: every later lookup, exact by
 * name, then sees what Go's decoder would have set.
 *
 * Only objects that Ollama decodes into structs are folded: the request, and the struct-typed
 * fields under it (messages, tool calls, tools, stream_options, response_format, ...). The
 * values of map, any or raw fields (options, format, files, parameters, arguments, a
 * message's OpenAI content parts, a JSON schema) keep their keys as sent, as Go keeps a map's
 * keys. The field lists are the json tags of Ollama's request types (api/types.go and
 * openai/openai.go); the request's list is the union over every route, which does no harm:
 * a route reads only its own fields, and Go ignores the others. */
#include <stdlib.h>
#include <string.h>

#include "serve_internal.h"

typedef struct fold_schema fold_schema;

typedef struct fold_field {
    const char *name;
    const fold_schema *sub; /* the struct of the value (an object, or an array's objects) */
} fold_field;

struct fold_schema {
    const fold_field *fields;
};

#define END                                                                                        \
    {                                                                                              \
        NULL, NULL                                                                                 \
    }

static const fold_schema effort = {(const fold_field[]){{"effort", NULL}, END}};
static const fold_schema json_schema = {(const fold_field[]){
    {"name", NULL}, {"description", NULL}, {"strict", NULL}, {"schema", NULL}, END}};
static const fold_schema response_format = {
    (const fold_field[]){{"type", NULL}, {"json_schema", &json_schema}, END}};
static const fold_schema stream_options = {(const fold_field[]){{"include_usage", NULL}, END}};
static const fold_schema function_call = {
    (const fold_field[]){{"index", NULL}, {"name", NULL}, {"arguments", NULL}, END}};
static const fold_schema tool_call = {
    (const fold_field[]){{"id", NULL}, {"type", NULL}, {"function", &function_call}, END}};
static const fold_schema function_def = {
    (const fold_field[]){{"name", NULL}, {"description", NULL}, {"parameters", NULL}, END}};
static const fold_schema tool = {
    (const fold_field[]){{"type", NULL}, {"items", NULL}, {"function", &function_def}, END}};
static const fold_schema message = {(const fold_field[]){{"role", NULL},
                                                         {"content", NULL},
                                                         {"thinking", NULL},
                                                         {"reasoning", NULL},
                                                         {"images", NULL},
                                                         {"tool_calls", &tool_call},
                                                         {"tool_name", NULL},
                                                         {"tool_call_id", NULL},
                                                         {"name", NULL},
                                                         END}};

static const fold_field request_fields[] = {
    /* Ollama */
    {"model", NULL},
    {"name", NULL},
    {"prompt", NULL},
    {"suffix", NULL},
    {"system", NULL},
    {"template", NULL},
    {"context", NULL},
    {"stream", NULL},
    {"raw", NULL},
    {"format", NULL},
    {"keep_alive", NULL},
    {"images", NULL},
    {"options", NULL},
    {"think", NULL},
    {"truncate", NULL},
    {"shift", NULL},
    {"logprobs", NULL},
    {"top_logprobs", NULL},
    {"messages", &message},
    {"tools", &tool},
    {"input", NULL},
    {"dimensions", NULL},
    {"quantize", NULL},
    {"quantization", NULL},
    {"from", NULL},
    {"files", NULL},
    {"adapters", NULL},
    {"license", NULL},
    {"parameters", NULL},
    {"renderer", NULL},
    {"parser", NULL},
    {"requires", NULL},
    {"info", NULL},
    {"modelfile", NULL},
    {"path", NULL},
    {"verbose", NULL},
    {"source", NULL},
    {"destination", NULL},
    {"insecure", NULL},
    {"username", NULL},
    {"password", NULL},
    /* OpenAI */
    {"stream_options", &stream_options},
    {"max_tokens", NULL},
    {"max_completion_tokens", NULL},
    {"seed", NULL},
    {"stop", NULL},
    {"temperature", NULL},
    {"top_p", NULL},
    {"frequency_penalty", NULL},
    {"presence_penalty", NULL},
    {"response_format", &response_format},
    {"reasoning_effort", NULL},
    {"reasoning", &effort},
    {"encoding_format", NULL},
    {"tool_choice", NULL},
    {"logit_bias", NULL},
    {"n", NULL},
    {"user", NULL},
    END,
};
static const fold_schema request = {request_fields};

/* The rune at *p folded as Go's foldName folds it (the smallest rune of its case orbit, for
 * the runes whose orbit holds an ASCII letter: ASCII letters upper case, U+212A KELVIN SIGN
 * K, U+017F LATIN SMALL LETTER LONG S S); other bytes as they are. Advances *p. */
static unsigned fold_next(const unsigned char **p)
{
    const unsigned char *s = *p;
    if (s[0] == 0xE2 && s[1] == 0x84 && s[2] == 0xAA) {
        *p += 3;
        return 'K';
    }
    if (s[0] == 0xC5 && s[1] == 0xBF) {
        *p += 2;
        return 'S';
    }
    *p += 1;
    return s[0] >= 'a' && s[0] <= 'z' ? s[0] - ('a' - 'A') : s[0];
}

/* Whether key names field under Go's folding (field is ASCII). */
static bool fold_equal(const char *key, const char *field)
{
    const unsigned char *k = (const unsigned char *)key, *f = (const unsigned char *)field;
    while (*k && *f)
        if (fold_next(&k) != fold_next(&f))
            return false;
    return !*k && !*f;
}

/* The field key reaches: its exact name first (Go prefers it), else a folded match. */
static const fold_field *find_field(const fold_schema *s, const char *key)
{
    for (const fold_field *f = s->fields; f->name; f++)
        if (!strcmp(f->name, key))
            return f;
    for (const fold_field *f = s->fields; f->name; f++)
        if (fold_equal(key, f->name))
            return f;
    return NULL;
}

/* Gives item the key name (cJSON owns its keys unless flagged constant). */
static void rename_key(cJSON *item, const char *name)
{
    char *copy = pti_malloc(strlen(name) + 1);
    if (!copy)
        return; /* out of memory: the key stays as it was sent (unused) */
    strcpy(copy, name);
    if (!(item->type & cJSON_StringIsConst))
        cJSON_free(item->string);
    item->string = copy;
    item->type &= ~cJSON_StringIsConst;
}

static void fold_object(cJSON *o, const fold_schema *s, int depth);

/* A struct field's value: the object, or every object of the array. */
static void fold_value(cJSON *v, const fold_schema *s, int depth)
{
    if (cJSON_IsObject(v)) {
        fold_object(v, s, depth + 1);
    } else if (cJSON_IsArray(v)) {
        for (cJSON *e = v->child; e; e = e->next)
            if (cJSON_IsObject(e))
                fold_object(e, s, depth + 1);
    }
}

static void fold_object(cJSON *o, const fold_schema *s, int depth)
{
    if (depth > 8) /* request > messages > tool_calls > function: the schemas are shallow */
        return;
    for (cJSON *c = o->child; c; c = c->next) {
        const fold_field *f = c->string ? find_field(s, c->string) : NULL;
        if (!f)
            continue;
        if (strcmp(c->string, f->name))
            rename_key(c, f->name);
        if (f->sub)
            fold_value(c, f->sub, depth);
    }
}

void ps_json_fold_keys(cJSON *j)
{
    if (cJSON_IsObject(j))
        fold_object(j, &request, 0);
}
