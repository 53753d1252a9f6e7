/* `promeserve list`, `show`, `cp` and `rm`: the store commands of the command line, printing
 * what `ollama list` / `ollama show` / `ollama cp` / `ollama rm` print. They read and write
 * the store directly ($OLLAMA_MODELS, else ~/.ollama/models), so no server has to run; the
 * work is include/prometorch/model_store.h (src/serve/http/store_ops.c), as for the HTTP
 * endpoints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <prometorch/core.h>
#include <prometorch/model_store.h>

#include "promeserve.h"

/* ---- a borderless table, as Ollama's tablewriter setup prints it ----------------------------- */

#define TABLE_COLS 4

typedef struct table {
    char *(*cells)[TABLE_COLS];
    int rows, cap, cols;
} table;

static void table_add(table *t, const char *const *cells)
{
    if (t->rows == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        void *grown = realloc(t->cells, (size_t)cap * sizeof *t->cells);
        if (!grown)
            return;
        t->cells = grown;
        t->cap = cap;
    }
    for (int c = 0; c < TABLE_COLS; c++)
        t->cells[t->rows][c] = strdup(c < t->cols && cells[c] ? cells[c] : "");
    t->rows++;
}

/* Columns padded to their widest cell and separated by four spaces. */
static void table_print(table *t, FILE *f)
{
    size_t width[TABLE_COLS] = {0};
    for (int r = 0; r < t->rows; r++)
        for (int c = 0; c < t->cols; c++)
            if (t->cells[r][c] && strlen(t->cells[r][c]) > width[c])
                width[c] = strlen(t->cells[r][c]);
    for (int r = 0; r < t->rows; r++) {
        for (int c = 0; c < t->cols; c++) {
            const char *s = t->cells[r][c] ? t->cells[r][c] : "";
            if (c == t->cols - 1)
                fprintf(f, "%s", s);
            else
                fprintf(f, "%-*s    ", (int)width[c], s);
        }
        fputc('\n', f);
    }
    for (int r = 0; r < t->rows; r++)
        for (int c = 0; c < TABLE_COLS; c++)
            free(t->cells[r][c]);
    free(t->cells);
    *t = (table){0};
}

/* ---- helpers --------------------------------------------------------------------------------- */

static int fail(const char *what)
{
    const char *msg = pt_last_error();
    fprintf(stderr, "Error: %s\n", what ? what : msg && *msg ? msg : "failed");
    return 1;
}

static bool store_root(char *buf, size_t cap)
{
    if (pt_model_store_root(buf, cap))
        return true;
    fprintf(stderr, "Error: no model store: set OLLAMA_MODELS or HOME\n");
    return false;
}

/* Seconds since the epoch of an RFC 3339 time as the store prints it. */
static int64_t parse_rfc3339(const char *s)
{
    struct tm tm = {0};
    int frac_end = 0;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                     &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &frac_end) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    int64_t t = (int64_t)timegm(&tm);
    const char *z = s + frac_end;
    if (*z == '.')
        z += 1 + strspn(z + 1, "0123456789");
    int oh = 0, om = 0;
    if ((*z == '+' || *z == '-') && sscanf(z + 1, "%2d:%2d", &oh, &om) == 2)
        t -= (*z == '-' ? -1 : 1) * (int64_t)(oh * 3600 + om * 60);
    return t;
}

static const char *json_str(const cJSON *o, const char *key)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
    return s ? s : "";
}

/* ---- list ------------------------------------------------------------------------------------ */

static bool name_matches(const char *name, int n_filters, char **filters)
{
    if (n_filters == 0)
        return true;
    for (int i = 0; i < n_filters; i++)
        if (!strncasecmp(name, filters[i], strlen(filters[i])))
            return true;
    return false;
}

int ps_cmd_list(int argc, char **argv)
{
    const char *models_dir = NULL;
    char *filters[64];
    int n_filters = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("List models\n\nUsage:\n  promeserve list [PREFIX...] [--models DIR]\n\n"
                   "Aliases:\n  list, ls\n\nReads $OLLAMA_MODELS (default ~/.ollama/models);\n"
                   "--models DIR also lists the .gguf files in DIR.\n");
            return 0;
        }
        if (!strcmp(argv[i], "--models") && i + 1 < argc)
            models_dir = argv[++i];
        else if (argv[i][0] == '-')
            return fprintf(stderr, "Error: unknown flag: %s\n", argv[i]), 1;
        else if (n_filters < 64)
            filters[n_filters++] = argv[i];
    }
    char root[4096];
    if (!store_root(root, sizeof root))
        return 1;
    char *text = pt_model_store_list(root, models_dir);
    cJSON *list = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!list)
        return fail("out of memory");
    table t = {.cols = 4};
    table_add(&t, (const char *[]){"NAME", "ID", "SIZE", "MODIFIED"});
    const cJSON *e;
    int64_t now = (int64_t)time(NULL);
    cJSON_ArrayForEach(e, list)
    {
        const char *name = json_str(e, "name");
        if (!name_matches(name, n_filters, filters))
            continue;
        char id[13], size[32], when[64];
        snprintf(id, sizeof id, "%.12s", json_str(e, "digest"));
        pt_format_bytes((int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "size")), size,
                        sizeof size);
        pt_format_ago(parse_rfc3339(json_str(e, "modified_at")), now, when, sizeof when);
        table_add(&t, (const char *[]){name, id, size, when});
    }
    table_print(&t, stdout);
    cJSON_Delete(list);
    return 0;
}

/* ---- show ------------------------------------------------------------------------------------ */

static bool is_gguf_file(const char *arg)
{
    struct stat st;
    size_t n = strlen(arg);
    return n > 5 && !strcasecmp(arg + n - 5, ".gguf") && stat(arg, &st) == 0 && S_ISREG(st.st_mode);
}

/* One section: "  Header", its rows indented by an empty first column, a blank line. */
static void section(const char *header, table *t)
{
    printf("  %s\n", header);
    table_print(t, stdout);
    printf("\n");
}

static void number_text(const cJSON *v, char *buf, size_t cap)
{
    if (cJSON_IsNumber(v))
        snprintf(buf, cap, "%.0f", v->valuedouble);
    else
        snprintf(buf, cap, "%s", "");
}

/* The first n non-empty lines of s (trimmed), then "..." when there were more (Ollama's head). */
static void head_rows(table *t, const char *s, int n)
{
    int count = 0;
    while (*s) {
        const char *end = strchr(s, '\n');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        while (len && (s[0] == ' ' || s[0] == '\t' || s[0] == '\r'))
            s++, len--;
        while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r'))
            len--;
        if (len && ++count <= n) {
            char *line = strndup(s, len);
            table_add(t, (const char *[]){"", line});
            free(line);
        }
        s = end ? end + 1 : s + strlen(s);
    }
    if (count > n)
        table_add(t, (const char *[]){"", "..."});
}

static void print_model_section(const cJSON *show)
{
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(show, "model_info");
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(show, "details");
    const char *arch = json_str(info, "general.architecture");
    char params[32], key[160], ctx[32], emb[32];
    pt_format_count(
        (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(info, "general.parameter_count")),
        params, sizeof params);
    snprintf(key, sizeof key, "%s.context_length", arch);
    number_text(cJSON_GetObjectItemCaseSensitive(info, key), ctx, sizeof ctx);
    snprintf(key, sizeof key, "%s.embedding_length", arch);
    number_text(cJSON_GetObjectItemCaseSensitive(info, key), emb, sizeof emb);
    table t = {.cols = 3};
    table_add(&t, (const char *[]){"", "architecture", arch});
    table_add(&t, (const char *[]){"", "parameters", params});
    table_add(&t, (const char *[]){"", "context length", ctx});
    table_add(&t, (const char *[]){"", "embedding length", emb});
    table_add(&t, (const char *[]){"", "quantization", json_str(details, "quantization_level")});
    section("Model", &t);
}

/* The parameters text split into fields, as strings.Fields splits each line. */
static void print_parameters(const char *text)
{
    table t = {.cols = 3};
    char *copy = strdup(text), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *key = line + strspn(line, " ");
        char *gap = strchr(key, ' ');
        if (gap)
            *gap++ = '\0';
        table_add(&t, (const char *[]){"", key, gap ? gap + strspn(gap, " ") : ""});
    }
    free(copy);
    section("Parameters", &t);
}

static void print_show(const cJSON *show)
{
    print_model_section(show);
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(show, "capabilities"), *c;
    if (cJSON_GetArraySize(caps) > 0) {
        table t = {.cols = 2};
        cJSON_ArrayForEach(c, caps) table_add(&t, (const char *[]){"", cJSON_GetStringValue(c)});
        section("Capabilities", &t);
    }
    if (*json_str(show, "parameters"))
        print_parameters(json_str(show, "parameters"));
    const char *texts[] = {"system", "System", "license", "License"};
    for (int i = 0; i < 4; i += 2) {
        if (!*json_str(show, texts[i]))
            continue;
        table t = {.cols = 2};
        head_rows(&t, json_str(show, texts[i]), 2);
        section(texts[i + 1], &t);
    }
}

int ps_cmd_show(int argc, char **argv)
{
    const char *model = NULL, *field = NULL;
    bool verbose = false;
    static const char *const fields[] = {"--modelfile", "--parameters", "--template", "--system",
                                         "--license"};
    for (int i = 1; i < argc; i++) {
        bool known = false;
        for (int k = 0; k < 5; k++)
            if (!strcmp(argv[i], fields[k]))
                field = argv[i] + 2, known = true;
        if (known)
            continue;
        if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
            verbose = true;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("Show information for a model\n\nUsage:\n  promeserve show MODEL [flags]\n\n"
                   "Flags:\n      --license      Show license of a model\n"
                   "      --modelfile    Show Modelfile of a model\n"
                   "      --parameters   Show parameters of a model\n"
                   "      --system       Show system message of a model\n"
                   "      --template     Show template of a model\n"
                   "  -v, --verbose      Show detailed model information\n\n"
                   "MODEL: a name in $OLLAMA_MODELS (default ~/.ollama/models) or a .gguf path\n");
            return 0;
        } else if (argv[i][0] == '-') {
            return fprintf(stderr, "Error: unknown flag: %s\n", argv[i]), 1;
        } else if (model) {
            return fprintf(stderr, "Error: accepts 1 arg(s), received more\n"), 1;
        } else {
            model = argv[i];
        }
    }
    if (!model)
        return fprintf(stderr, "Error: accepts 1 arg(s), received 0\n"), 1;
    char *text;
    cJSON *show;
    char root[4096];
    if (is_gguf_file(model)) {
        const char *slash = strrchr(model, '/');
        text = pt_model_store_show_file(model, slash ? slash + 1 : model, verbose);
    } else {
        if (!store_root(root, sizeof root))
            return 1;
        text = pt_model_store_show(root, model, verbose);
    }
    show = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!show)
        return fail(NULL);
    if (field) {
        const char *key = !strcmp(field, "modelfile") ? "modelfile" : field;
        printf("%s\n", json_str(show, key));
    } else {
        print_show(show);
    }
    cJSON_Delete(show);
    return 0;
}

/* ---- cp and rm ------------------------------------------------------------------------------- */

int ps_cmd_cp(int argc, char **argv)
{
    if (argc != 3)
        return fprintf(stderr, "Error: accepts 2 arg(s), received %d\n", argc - 1), 1;
    char root[4096];
    if (!store_root(root, sizeof root))
        return 1;
    if (!pt_model_store_copy(root, argv[1], argv[2]))
        return fail(NULL);
    printf("copied '%s' to '%s'\n", argv[1], argv[2]);
    return 0;
}

int ps_cmd_rm(int argc, char **argv)
{
    if (argc < 2)
        return fprintf(stderr, "Error: requires at least 1 arg(s), only received 0\n"), 1;
    char root[4096];
    if (!store_root(root, sizeof root))
        return 1;
    for (int i = 1; i < argc; i++) {
        if (!pt_model_store_delete(root, argv[i]))
            return fail(NULL);
        printf("deleted '%s'\n", argv[i]);
    }
    return 0;
}
