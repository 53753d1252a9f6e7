/* Tests of JSON-constrained sampling (src/serve/http/json_constraint*.c): the byte-level matcher
 * over the whole JSON grammar (valid documents accepted whole and byte by byte; invalid ones
 * refused at the exact byte where they first go wrong), the JSON-schema subset (required
 * properties and their order, enum/const, integer vs number, nested objects and arrays with
 * min/maxItems, anyOf, $ref recursion, the errors for unsupported and malformed schemas),
 * random walks over a synthetic vocabulary whose results cJSON parses and direct assertions
 * check against the schema, and the real SmolLM2 vocabulary (49k tokens): correctness of the
 * allows() shortcuts and the time of one full-vocabulary scan.
 *
 * The property order expected with a schema (required properties first, then optional ones,
 * each in `properties` order) is llama.cpp's: json_schema_to_gbnf of llama-cpp-python 0.3.36
 * gives `root ::= "{" space b-kv "," space c-kv ( "," space ( a-kv ) )? "}" space` for
 * properties a, b, c with required [c, b]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "testutil.h"

#include "prometorch/core.h"
#include "prometorch/gguf.h"
#include "serve/http/json_constraint.h"
#include "serve/llm/tokenizer.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static pti_json_matcher *new_matcher(const char *schema_json)
{
    cJSON *schema = NULL;
    if (schema_json) {
        schema = cJSON_Parse(schema_json);
        if (!schema) {
            fail_msg("test schema does not parse: %s", schema_json);
        }
    }
    pti_json_matcher *m = pti_json_matcher_new(schema);
    if (!m) {
        fail_msg("schema refused: %s: %s", schema_json ? schema_json : "(none)", pt_last_error());
    }
    cJSON_Delete(schema);
    return m;
}

/* Feeds text byte by byte; returns the index of the first refused byte, or -1. */
static long feed(pti_json_matcher *m, const char *text, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!pti_json_matcher_allows(m, text + i, 1)) {
            return (long)i;
        }
        pti_json_matcher_advance(m, text + i, 1);
    }
    return -1;
}

/* Accepted whole (from the start) and byte by byte; complete at the end; done as expected. */
static void expect_valid_n(const char *schema, const char *text, size_t n, int done)
{
    pti_json_matcher *m = new_matcher(schema);
    if (!pti_json_matcher_allows(m, text, n)) {
        fail_msg("whole text refused: %.*s", (int)n, text);
    }
    long bad = feed(m, text, n);
    if (bad >= 0) {
        fail_msg("byte %ld of %.*s refused (schema %s)", bad, (int)n, text, schema ? schema : "-");
    }
    if (!pti_json_matcher_complete(m)) {
        fail_msg("not complete: %.*s", (int)n, text);
    }
    if (done >= 0 && pti_json_matcher_done(m) != (bool)done) {
        fail_msg("done() is %d for %.*s", !done, (int)n, text);
    }
    pti_json_matcher_free(m);
    /* the same text in two pieces split everywhere */
    for (size_t cut = 1; cut < n; cut += 1 + n / 16) {
        m = new_matcher(schema);
        assert_true(pti_json_matcher_allows(m, text, cut));
        pti_json_matcher_advance(m, text, cut);
        assert_true(pti_json_matcher_allows(m, text + cut, n - cut));
        pti_json_matcher_advance(m, text + cut, n - cut);
        assert_true(pti_json_matcher_complete(m));
        pti_json_matcher_free(m);
    }
}

static void expect_valid(const char *schema, const char *text, int done)
{
    expect_valid_n(schema, text, strlen(text), done);
}

/* Refused first at byte bad_at (-1: every byte accepted, but the text is not complete). */
static void expect_invalid_n(const char *schema, const char *text, size_t n, long bad_at)
{
    pti_json_matcher *m = new_matcher(schema);
    if (bad_at >= 0) {
        if (pti_json_matcher_allows(m, text, n) ||
            !pti_json_matcher_allows(m, text, (size_t)bad_at)) {
            fail_msg("%.*s: allows(whole) or allows(first %ld bytes) is wrong", (int)n, text,
                     bad_at);
        }
    }
    long bad = feed(m, text, n);
    if (bad != bad_at) {
        fail_msg("%.*s: first refused byte %ld, expected %ld (schema %s)", (int)n, text, bad,
                 bad_at, schema ? schema : "-");
    }
    if (bad_at < 0) {
        assert_false(pti_json_matcher_complete(m));
        assert_false(pti_json_matcher_done(m));
    }
    pti_json_matcher_free(m);
}

static void expect_invalid(const char *schema, const char *text, long bad_at)
{
    expect_invalid_n(schema, text, strlen(text), bad_at);
}

/* ---- the JSON grammar ----------------------------------------------------------------------- */

static void test_valid_documents(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int done; /* -1: not checked */
    } cases[] = {
        {"{}", 1},
        {"[]", 1},
        {"{\"a\":1}", 1},
        {"[1,2,3]", 1},
        {"\"x\"", 1},
        {"0", 0},
        {"-0", 0},
        {"-0.5e+10", 0},
        {"1E5", 0},
        {"123.456", 0},
        {"1e-7", 0},
        {"true", 1},
        {"false", 1},
        {"null", 1},
        {"{ \"a\" : [ true , false , null ] } ", 1},
        {"{\n  \"a\":\n\t\t[\n    1,\n    2\n  ]\n}\n", 1},
        {"[[[]]]", 1},
        {"{\"a\":{\"b\":{\"c\":[]}},\"d\":\"\"}", 1},
        {"\"\\\" \\\\ \\b \\f \\n \\r \\t \\u0041 \\u00e9\"", 1},
        {"\"\\ud83d\\ude00\"", 1},
        {"\"\\uD83D\\uDE00\\uFFFF\\u0000\"", 1},
        {"\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\xed\x9f\xbf\xee\x80\x80\"", 1},
        {"[1\n                    ]", 1}, /* a newline and 20 blanks: the bound */
        {"{\"\":{\"\":[{},[],\"\",0,-1.5E-0,true]}}", 1},
        {"12 ", 1}, /* a number followed by a blank has ended */
        {"[-0,0.0,10,1e1,1E+1,1e-1,-12.5e10]", 1},
        /* 16 integer digits (llama.cpp's `[1-9] [0-9]{0,15}`); fraction digits are not bounded */
        {"[1234567890123456,-9999999999999999,0.12345678901234567890]", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect_valid(NULL, cases[i].text, cases[i].done);
    }
    /* nesting up to the depth bound */
    char deep[2 * PTI_JSON_MAX_DEPTH + 1];
    memset(deep, '[', PTI_JSON_MAX_DEPTH);
    memset(deep + PTI_JSON_MAX_DEPTH, ']', PTI_JSON_MAX_DEPTH);
    deep[2 * PTI_JSON_MAX_DEPTH] = '\0';
    expect_valid(NULL, deep, 1);
}

static void test_invalid_documents(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        long bad_at; /* -1: a prefix that is never completed */
    } cases[] = {
        {"{,}", 1},
        {"[1,]", 3},
        {"[01]", 2},
        {"01", 1},
        {"-a", 1},
        {"1.", -1},
        {"1.e5", 2},
        {"1e", -1},
        {"1e+", -1},
        {"1e+x", 3},
        {"+1", 0},
        {".5", 0},
        {"tru", -1},
        {"trux", 3},
        {"nul1", 3},
        {"nan", 1},
        {"Infinity", 0},
        {"'a'", 0},
        {"\"abc", -1},
        {"\"a\x01\"", 2},
        {"\"a\nb\"", 2},
        {"\"\\x\"", 2},
        {"\"\\/\"", 2},              /* not among llama.cpp's escapes ["\\bfnrt] */
        {"\"a\x7f\"", 2},            /* DEL: [^"\\\x7F\x00-\x1F] in llama.cpp's grammars */
        {"[12345678901234567]", 17}, /* a 17th integer digit */
        {"[-12345678901234567]", 18},
        {" {}", 0}, /* no whitespace before the root value (root ::= object) */
        {"\n{}", 0},
        {"\"\\u12G4\"", 5},
        {"\"\\udc00\"", 4}, /* a lone low surrogate: wrong at "\udc" */
        {"\"\\ud800\"", 7}, /* a high surrogate not followed by a low one */
        {"\"\\ud800x\"", 7},
        {"\"\\ud800\\n\"", 8},
        {"\"\\ud800\\ud800\"", 10}, /* high, high */
        {"\"\\ud800\\u0041\"", 9},
        {"\"\xc0\x80\"", 1}, /* overlong */
        {"\"\xc1\xbf\"", 1},
        {"\"\xe0\x80\x80\"", 2},     /* overlong 3-byte */
        {"\"\xf0\x80\x80\x80\"", 2}, /* overlong 4-byte */
        {"\"\xed\xa0\x80\"", 2},     /* UTF-16 surrogate in UTF-8 */
        {"\"\xf4\x90\x80\x80\"", 2}, /* above U+10FFFF */
        {"\"\xf5\x80\x80\x80\"", 1},
        {"\"\x80\"", 1}, /* a lone continuation byte */
        {"\"\xc3\"", 2}, /* truncated */
        {"\"\xe2\x82\"", 3},
        {"\"\xff\"", 1},
        {"[\n                     ]", 22}, /* a newline and 21 blanks */
        {"[  ]", 2},                       /* two blanks */
        {"[\n\n]", 2},                     /* two newlines */
        {"[\r\n]", 1},                     /* a carriage return */
        {"[\t]", 1},                       /* a gap starting with a tab */
        {"[ \n]", 2},                      /* a blank, then a newline */
        {"{\"a\" 1}", 5},
        {"{\"a\":1 \"b\":2}", 7},
        {"[1 2]", 3},
        {"{\"a\"}", 4},
        {"{1:2}", 1},
        {"[}", 1},
        {"{]", 1},
        {"\"a\" \"b\"", 4},
        {"1 2", 2},
        {"{\"a\":1,}", 7},
        {"[1,2]]", 5},
        {"{}}", 2},
        {"{} {}", 3},
        {"[\"a\":1]", 4},
        {"{\"a\":}", 5},
        {"-", -1},
        {"--1", 1},
        {"1.5.", 3},
        {"0x1", 1},
        {"", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect_invalid(NULL, cases[i].text, cases[i].bad_at);
    }
    /* NUL bytes are refused anywhere */
    expect_invalid_n(NULL, "\"a\0\"", 4, 2);
    expect_invalid_n(NULL, "[\0]", 3, 1);
    /* one level deeper than the bound */
    char deep[PTI_JSON_MAX_DEPTH + 2];
    memset(deep, '[', PTI_JSON_MAX_DEPTH + 1);
    deep[PTI_JSON_MAX_DEPTH + 1] = '\0';
    expect_invalid(NULL, deep, PTI_JSON_MAX_DEPTH);
    char deep_obj[4 * PTI_JSON_MAX_DEPTH + 8] = "";
    for (int i = 0; i <= PTI_JSON_MAX_DEPTH; i++) {
        strcat(deep_obj, "{\"\":");
    }
    expect_invalid(NULL, deep_obj, 4 * PTI_JSON_MAX_DEPTH);
}

static void test_whitespace_bound(void **state)
{
    (void)state;
    char text[64];
    /* at every place between tokens (llama.cpp's `ws ::= | " " | "\n" [ \t]{0,20}`): one
     * blank, or a newline and 20 blanks or tabs; a 21st indent byte, a second blank, a second
     * newline or a carriage return is refused */
    const char *fmt[] = {"{%s\"a\":1}", "{\"a\"%s:1}", "{\"a\":%s1}", "{\"a\":1%s}",
                         "[1%s,2]",     "[1,%s2]",     "{\"a\":1}%s"};
    static const struct {
        const char *gap;
        long bad; /* offset of the refused byte in the gap; -1: valid */
    } gaps[] = {
        {" ", -1},
        {"\n", -1},
        {"\n \t \t \t \t \t \t \t \t \t \t", -1}, /* 20 indent bytes */
        {"\n \t \t \t \t \t \t \t \t \t \t ", 21},
        {"  ", 1},
        {"\n\n", 1},
        {"\r\n", 0},
        {"\n\r", 1},
        {" \n", 1},
        {"\t", 0},
    };
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
        for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
            snprintf(text, sizeof text, fmt[i], gaps[g].gap);
            if (gaps[g].bad < 0) {
                expect_valid(NULL, text, -1);
            } else {
                long at = (long)(strstr(text, gaps[g].gap) - text) + gaps[g].bad;
                expect_invalid(NULL, text, at);
            }
        }
    }
    /* a schema's gaps have the same bound */
    const char *schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                         "\"integer\"}},\"required\":[\"a\"]}";
    expect_valid(schema, "{\n  \"a\": 1\n}", 1);
    expect_invalid(schema, "{\r\n  \"a\": 1}", 1);
    expect_invalid(schema, "{\"a\":  1}", 6);
    /* blanks inside strings are characters, not whitespace */
    memset(text, ' ', 40);
    text[0] = '"';
    text[39] = '"';
    text[40] = '\0';
    expect_valid(NULL, text, 1);
}

static void test_complete_and_done(void **state)
{
    (void)state;
    pti_json_matcher *m = new_matcher(NULL);
    assert_false(pti_json_matcher_complete(m));
    assert_false(pti_json_matcher_done(m));
    assert_true(pti_json_matcher_allows(m, "", 0));
    pti_json_matcher_advance(m, "12", 2);
    assert_true(pti_json_matcher_complete(m)); /* a bare number: complete, not done */
    assert_false(pti_json_matcher_done(m));
    assert_true(pti_json_matcher_allows(m, "3", 1));
    assert_true(pti_json_matcher_allows(m, ".5e3", 4));
    assert_true(pti_json_matcher_allows(m, " ", 1));
    assert_false(pti_json_matcher_allows(m, "x", 1));
    pti_json_matcher_advance(m, " ", 1);
    assert_true(pti_json_matcher_done(m));
    assert_false(pti_json_matcher_allows(m, "3", 1));
    pti_json_matcher_free(m);

    m = new_matcher(NULL);
    pti_json_matcher_advance(m, "{\"a\":[1", 7);
    assert_false(pti_json_matcher_complete(m));
    pti_json_matcher_advance(m, "]}", 2);
    assert_true(pti_json_matcher_complete(m));
    assert_true(pti_json_matcher_done(m));
    assert_true(pti_json_matcher_allows(m, "\n", 1));
    assert_false(pti_json_matcher_allows(m, ",", 1));
    /* advancing with refused bytes leaves a matcher that refuses everything */
    pti_json_matcher_advance(m, "x", 1);
    assert_false(pti_json_matcher_allows(m, " ", 1));
    assert_false(pti_json_matcher_complete(m));
    assert_false(pti_json_matcher_done(m));
    pti_json_matcher_free(m);

    /* NULL handling */
    pti_json_matcher_free(NULL);
    assert_false(pti_json_matcher_allows(NULL, "{", 1));
    assert_false(pti_json_matcher_complete(NULL));
    assert_false(pti_json_matcher_done(NULL));
}

static void test_engine_interface(void **state)
{
    (void)state;
    pti_constraint c = pti_json_constraint(new_matcher("{\"type\":\"boolean\"}"));
    assert_non_null(c.state);
    assert_true(c.allows(c.state, "tr", 2));
    assert_false(c.allows(c.state, "1", 1));
    c.advance(c.state, "tr", 2);
    assert_false(c.complete(c.state));
    c.advance(c.state, "ue", 2);
    assert_true(c.complete(c.state));
    assert_true(c.done(c.state));
    c.free(c.state);
    c = pti_json_constraint(NULL);
    assert_null(c.state);
    /* Ollama's format "json" (root ::= object): any object, nothing else */
    c = pti_json_constraint(new_matcher("{\"type\":\"object\"}"));
    assert_false(c.allows(c.state, "[", 1));
    assert_false(c.allows(c.state, "\"a\"", 3));
    assert_true(c.allows(c.state, "{\"k\": [1, {}]} ", 15));
    assert_false(c.allows(c.state, " {", 2)); /* nothing before the object */
    c.free(c.state);
}

/* ---- schemas -------------------------------------------------------------------------------- */

#define ORDER_SCHEMA                                                                               \
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"type\":"            \
    "\"integer\"},\"c\":{\"type\":\"boolean\"}},\"required\":[\"c\",\"b\"]}"

static void test_schema_required_and_order(void **state)
{
    (void)state;
    const char *s = ORDER_SCHEMA;
    expect_valid(s, "{\"b\":1,\"c\":true}", 1);
    expect_valid(s, "{ \"b\" : -7 , \"c\" : false , \"a\" : \"x\" }", 1);
    expect_invalid(s, "{\"c\":true,\"b\":1}", 2);             /* required b comes first */
    expect_invalid(s, "{\"a\":\"x\",\"b\":1,\"c\":true}", 2); /* optional after required */
    expect_invalid(s, "{\"b\":1}", 6);                        /* c is required */
    expect_invalid(s, "{}", 1);
    expect_invalid(s, "{\"b\":1,\"c\":true,\"d\":1}", 17); /* no other properties */
    expect_invalid(s, "{\"b\":1,\"c\":true,\"a\":\"x\",", 23);
    expect_invalid(s, "{\"b\":1,\"b\":2", 8);
    expect_invalid(s, "{\"b\":1.5", 6); /* integer */
    expect_invalid(s, "{\"b\":\"1\"", 5);
    expect_invalid(s, "{\"bb\":1", 3);
    /* optional properties may be skipped but keep their order */
    const char *opt = "{\"properties\":{\"x\":{\"type\":\"null\"},\"y\":{\"type\":\"null\"},"
                      "\"z\":{\"type\":\"null\"}}}";
    expect_valid(opt, "{}", 1);
    expect_valid(opt, "{\"y\":null}", 1);
    expect_valid(opt, "{\"x\":null,\"z\":null}", 1);
    expect_valid(opt, "{\"x\":null,\"y\":null,\"z\":null}", 1);
    expect_invalid(opt, "{\"z\":null,\"x\"", 9); /* nothing after z */
    expect_invalid(opt, "{\"y\":null,\"y\"", 11);
    /* a required property after optional ones: the optional ones before it may be skipped */
    const char *mid = "{\"properties\":{\"p\":{\"type\":\"null\"},\"q\":{\"type\":\"null\"},"
                      "\"r\":{\"type\":\"null\"}},\"required\":[\"q\"]}";
    expect_valid(mid, "{\"q\":null}", 1);
    expect_valid(mid, "{\"q\":null,\"p\":null,\"r\":null}", 1);
    expect_invalid(mid, "{\"p\"", 2);
    /* keys are matched as their JSON text, including escapes */
    const char *esc = "{\"properties\":{\"a\\\"b\":{\"const\":1},\"\xc3\xa9\":{\"const\":2}},"
                      "\"required\":[\"a\\\"b\",\"\xc3\xa9\"]}";
    expect_valid(esc, "{\"a\\\"b\":1,\"\xc3\xa9\":2}", 1);
    expect_invalid(esc, "{\"a\\u0022b\"", 4);
    /* additionalProperties false with no properties: only {} */
    expect_valid("{\"type\":\"object\",\"additionalProperties\":false}", "{ }", 1);
    expect_invalid("{\"type\":\"object\",\"additionalProperties\":false}", "{\"a\":1}", 1);
    /* a plain object type: any object (as llama.cpp) */
    expect_valid("{\"type\":\"object\"}", "{\"k\":[1,{\"z\":null}],\"j\":\"v\"}", 1);
    expect_invalid("{\"type\":\"object\"}", "[]", 0);
}

static void test_schema_enum_const(void **state)
{
    (void)state;
    const char *s = "{\"enum\":[\"red\",\"green\",1,10,null,\"a\\\"b\",2.5]}";
    expect_valid(s, "\"red\"", 1);
    expect_valid(s, "\"green\"", 1);
    expect_valid(s, "null", 1);
    expect_valid(s, "\"a\\\"b\"", 1);
    expect_valid(s, "10", 1);
    expect_valid(s, "2.5", 1);
    expect_valid(s, "1 ", 1);
    expect_invalid(s, "\"blue\"", 1);
    expect_invalid(s, "\"redd\"", 4);
    expect_invalid(s, "\"re", -1);
    expect_invalid(s, "100", 2);
    expect_invalid(s, "2.50", 3);
    expect_invalid(s, "true", 0);
    expect_invalid(s, "[\"red\"]", 0);
    /* with a type, values of other types are dropped */
    expect_valid("{\"type\":\"string\",\"enum\":[\"a\",1]}", "\"a\"", 1);
    expect_invalid("{\"type\":\"string\",\"enum\":[\"a\",1]}", "1", 0);
    expect_invalid("{\"type\":\"integer\",\"enum\":[1.5,2]}", "1", 0);
    expect_valid("{\"type\":\"integer\",\"enum\":[1.5,2]}", "2", 1);
    /* const */
    expect_valid("{\"const\":\"x\"}", "\"x\"", 1);
    expect_invalid("{\"const\":\"x\"}", "\"y\"", 1);
    expect_valid("{\"const\":false}", "false", 1);
    expect_invalid("{\"const\":false}", "true", 0);
    /* inside an object */
    const char *obj = "{\"type\":\"object\",\"properties\":{\"c\":{\"enum\":[\"r\",\"g\"]}},"
                      "\"required\":[\"c\"]}";
    expect_valid(obj, "{\"c\":\"g\"}", 1);
    expect_invalid(obj, "{\"c\":\"b\"}", 6);
}

static void test_schema_types(void **state)
{
    (void)state;
    const char *i = "{\"type\":\"integer\"}";
    expect_valid(i, "12", 0);
    expect_valid(i, "-3 ", 1);
    expect_valid(i, "0", 0);
    expect_invalid(i, "1.0", 1);
    expect_invalid(i, "1e3", 1);
    expect_invalid(i, "\"1\"", 0);
    const char *n = "{\"type\":\"number\"}";
    expect_valid(n, "1.5e-3", 0);
    expect_valid(n, "7", 0);
    expect_invalid(n, "true", 0);
    const char *multi = "{\"type\":[\"string\",\"null\"]}";
    expect_valid(multi, "null", 1);
    expect_valid(multi, "\"s\"", 1);
    expect_invalid(multi, "0", 0);
    expect_invalid(multi, "false", 0);
    expect_valid("{\"type\":\"boolean\"}", "false", 1);
    expect_invalid("{\"type\":\"boolean\"}", "null", 0);
    expect_valid("{\"type\":\"null\"}", "null", 1);
    expect_invalid("{\"type\":\"null\"}", "nul ", 3);
    expect_valid("{\"type\":\"array\"}", "[1,\"a\",{},[]]", 1);
    expect_valid("{}", "{\"x\":[true]}", 1);
    expect_valid("true", "[null]", 1);
    /* annotations are ignored */
    expect_valid("{\"type\":\"string\",\"title\":\"t\",\"description\":\"d\",\"default\":\"x\","
                 "\"examples\":[\"y\"],\"format\":\"date-time\",\"$schema\":\"x\",\"$id\":\"i\"}",
                 "\"anything\"", 1);
}

static void test_schema_nested_arrays(void **state)
{
    (void)state;
    const char *s =
        "{\"type\":\"object\",\"properties\":{"
        "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,"
        "\"maxItems\":2},"
        "\"pos\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},"
        "\"y\":{\"type\":\"number\"}},\"required\":[\"x\",\"y\"]},"
        "\"grid\":{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":"
        "\"integer\"},\"maxItems\":1}}},"
        "\"required\":[\"tags\",\"pos\"]}";
    expect_valid(s, "{\"tags\":[\"a\"],\"pos\":{\"x\":1,\"y\":2.5}}", 1);
    expect_valid(s, "{\"tags\":[\"a\",\"b\"],\"pos\":{\"x\":-1,\"y\":0},\"grid\":[[],[3]]}", 1);
    expect_invalid(s, "{\"tags\":[]", 9);             /* minItems 1 */
    expect_invalid(s, "{\"tags\":[\"a\",\"b\",", 16); /* maxItems 2 */
    expect_invalid(s, "{\"tags\":[1]", 9);
    expect_invalid(s, "{\"tags\":[\"a\"],\"pos\":{\"x\":1}", 26); /* y required */
    expect_invalid(s, "{\"tags\":[\"a\"],\"pos\":{\"x\":1,\"y\":2},\"grid\":[[1,", 44);
    expect_invalid(s, "{\"tags\":[\"a\"],\"pos\":{\"x\":1,\"y\":2},\"grid\":[[1.5", 44);
    /* maxItems 0: only [] */
    expect_valid("{\"type\":\"array\",\"maxItems\":0}", "[ ]", 1);
    expect_invalid("{\"type\":\"array\",\"maxItems\":0}", "[1", 1);
    expect_valid("{\"items\":{\"const\":0},\"minItems\":3,\"maxItems\":3}", "[0,0,0]", 1);
    expect_invalid("{\"items\":{\"const\":0},\"minItems\":3,\"maxItems\":3}", "[0,0]", 4);
}

static void test_schema_any_of(void **state)
{
    (void)state;
    const char *s = "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"},{\"type\":\"object\","
                    "\"properties\":{\"k\":{\"type\":\"null\"}},\"required\":[\"k\"]}]}";
    expect_valid(s, "\"x\"", 1);
    expect_valid(s, "5", 0);
    expect_valid(s, "{\"k\":null}", 1);
    expect_invalid(s, "5.5", 1);
    expect_invalid(s, "true", 0);
    expect_invalid(s, "{\"j\"", 2);
    /* alternatives that share a prefix are followed together */
    const char *two =
        "{\"oneOf\":[{\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"]},"
        "{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"const\":1}},"
        "\"required\":[\"a\"]}]}";
    expect_valid(two, "{\"a\":\"x\"}", 1);
    expect_valid(two, "{\"a\":1}", 1);
    expect_valid(two, "{\"a\":1,\"b\":1}", 1);
    expect_invalid(two, "{\"a\":\"x\",", 8);
    expect_invalid(two, "{\"a\":true}", 5);
    /* in arrays, with nested unions and references */
    const char *arr = "{\"$defs\":{\"n\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"boolean\"}]}},"
                      "\"type\":\"array\",\"items\":{\"anyOf\":[{\"$ref\":\"#/$defs/n\"},"
                      "{\"enum\":[\"a\",\"ab\"]}]}}";
    expect_valid(arr, "[null,true,\"a\",\"ab\",false]", 1);
    expect_invalid(arr, "[\"abc\"]", 4);
    expect_invalid(arr, "[1]", 1);
    /* pydantic's Optional[...] shape, with annotations next to anyOf */
    expect_valid("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],\"default\":null,"
                 "\"title\":\"X\"}",
                 "null", 1);
}

static void test_schema_ref(void **state)
{
    (void)state;
    const char *s = "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":"
                    "\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":"
                    "\"null\"}]}},\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}";
    expect_valid(s, "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3,\"next\":null}}}", 1);
    expect_invalid(s, "{\"v\":1,\"next\":{\"v\":2}", 20);
    expect_invalid(s, "{\"v\":1,\"next\":{\"w\"", 16);
    const char *d = "{\"definitions\":{\"a/b\":{\"type\":\"string\"}},\"type\":\"array\","
                    "\"items\":{\"$ref\":\"#/definitions/a~1b\"}}";
    expect_valid(d, "[\"x\",\"y\"]", 1);
    expect_invalid(d, "[1]", 1);
    /* recursion through the root, and a chain of aliases */
    const char *root = "{\"type\":[\"array\",\"integer\"],\"items\":{\"$ref\":\"#\"}}";
    expect_valid(root, "[1,[2,[]],[[[3]]]]", 1);
    expect_invalid(root, "[1,[\"x\"", 4);
    const char *chain = "{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/c\"},"
                        "\"c\":{\"const\":7}},\"$ref\":\"#/$defs/a\"}";
    expect_valid(chain, "7", 1);
    expect_invalid(chain, "8", 0);
    /* recursion deeper than the depth bound is refused at the bound */
    const char *lst = "{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}";
    char deep[PTI_JSON_MAX_DEPTH + 2];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = '\0';
    expect_invalid(lst, deep, PTI_JSON_MAX_DEPTH);
}

static void expect_schema_error(const char *schema_json, pt_status st, const char *substring)
{
    cJSON *schema = cJSON_Parse(schema_json);
    assert_non_null(schema);
    pti_json_matcher *m = pti_json_matcher_new(schema);
    if (m) {
        fail_msg("schema accepted: %s", schema_json);
    }
    assert_pt_error(m, st, substring);
    cJSON_Delete(schema);
}

static void test_schema_errors(void **state)
{
    (void)state;
    expect_schema_error("{\"type\":\"string\",\"pattern\":\"^a\"}", PT_ERR_UNSUPPORTED,
                        "keyword 'pattern'");
    expect_schema_error("{\"properties\":{\"a\":{\"type\":\"string\",\"minLength\":2}}}",
                        PT_ERR_UNSUPPORTED, "'minLength' at /properties/a");
    expect_schema_error("{\"allOf\":[{}]}", PT_ERR_UNSUPPORTED, "'allOf'");
    expect_schema_error("{\"type\":\"object\",\"properties\":{},\"additionalProperties\":true}",
                        PT_ERR_UNSUPPORTED, "additionalProperties");
    expect_schema_error("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}",
                        PT_ERR_UNSUPPORTED, "additionalProperties");
    expect_schema_error("{\"$ref\":\"http://example.com/s.json\"}", PT_ERR_UNSUPPORTED, "$ref");
    expect_schema_error("{\"$ref\":\"#/properties/a\"}", PT_ERR_UNSUPPORTED, "$ref");
    expect_schema_error("{\"$ref\":\"#/$defs/a\",\"type\":\"string\"}", PT_ERR_UNSUPPORTED,
                        "'$ref' together with 'type'");
    expect_schema_error("{\"anyOf\":[{}],\"type\":\"string\"}", PT_ERR_UNSUPPORTED,
                        "'anyOf' together with 'type'");
    expect_schema_error("{\"enum\":[{\"a\":1}]}", PT_ERR_UNSUPPORTED, "'enum' of objects");
    expect_schema_error("{\"const\":[1]}", PT_ERR_UNSUPPORTED, "'const' of objects or arrays");
    expect_schema_error("{\"items\":[{}]}", PT_ERR_UNSUPPORTED, "tuples");
    expect_schema_error("{\"anyOf\":[{},{},{},{},{},{},{},{},{}]}", PT_ERR_UNSUPPORTED,
                        "more than 8 alternatives");
    expect_schema_error("{\"type\":\"strin\"}", PT_ERR_INVALID_ARG, "'type'");
    expect_schema_error("{\"type\":[]}", PT_ERR_INVALID_ARG, "'type'");
    expect_schema_error("{\"type\":7}", PT_ERR_INVALID_ARG, "'type'");
    expect_schema_error("{\"$ref\":\"#/$defs/missing\"}", PT_ERR_INVALID_ARG,
                        "names no definition");
    expect_schema_error("{\"$ref\":5}", PT_ERR_INVALID_ARG, "'$ref'");
    expect_schema_error("{\"type\":\"array\",\"minItems\":3,\"maxItems\":1}", PT_ERR_INVALID_ARG,
                        "'minItems' 3 is more than 'maxItems' 1");
    expect_schema_error("{\"type\":\"array\",\"minItems\":-1}", PT_ERR_INVALID_ARG, "minItems");
    expect_schema_error("{\"type\":\"array\",\"maxItems\":1.5}", PT_ERR_INVALID_ARG, "maxItems");
    expect_schema_error("{\"properties\":{},\"required\":[\"a\"]}", PT_ERR_INVALID_ARG,
                        "required property 'a'");
    expect_schema_error("{\"properties\":{\"a\":{}},\"required\":\"a\"}", PT_ERR_INVALID_ARG,
                        "'required'");
    expect_schema_error("{\"properties\":[]}", PT_ERR_INVALID_ARG, "'properties'");
    expect_schema_error("{\"properties\":{\"a\":{},\"a\":{}}}", PT_ERR_INVALID_ARG, "twice");
    expect_schema_error("{\"properties\":{\"a\":5}}", PT_ERR_INVALID_ARG, "/properties/a");
    expect_schema_error("{\"anyOf\":[]}", PT_ERR_INVALID_ARG, "non-empty array");
    expect_schema_error("{\"enum\":[]}", PT_ERR_INVALID_ARG, "non-empty array");
    expect_schema_error("{\"type\":\"string\",\"enum\":[1,2]}", PT_ERR_INVALID_ARG, "'enum'");
    expect_schema_error("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}",
                        PT_ERR_INVALID_ARG, "cycle");
    expect_schema_error("{\"$defs\":{\"a\":{\"anyOf\":[{\"$ref\":\"#/$defs/a\"}]}},"
                        "\"$ref\":\"#/$defs/a\"}",
                        PT_ERR_INVALID_ARG, "refer back");
    expect_schema_error("{\"$defs\":{\"n\":{\"properties\":{\"x\":{\"$ref\":\"#/$defs/n\"}},"
                        "\"required\":[\"x\"]}},\"$ref\":\"#/$defs/n\"}",
                        PT_ERR_INVALID_ARG, "never");
    expect_schema_error("{\"items\":{\"$ref\":\"#\"},\"minItems\":1}", PT_ERR_INVALID_ARG, "never");
    expect_schema_error("false", PT_ERR_INVALID_ARG, "matches nothing");
    expect_schema_error("5", PT_ERR_INVALID_ARG, "must be an object");
    expect_schema_error("{\"enum\":[1e999]}", PT_ERR_INVALID_ARG, "out of range");
    /* a schema nested beyond the compiler's bound */
    char deep[4096] = "";
    for (int i = 0; i < 200; i++) {
        strcat(deep, "{\"items\":");
    }
    strcat(deep, "{}");
    for (int i = 0; i < 200; i++) {
        strcat(deep, "}");
    }
    expect_schema_error(deep, PT_ERR_INVALID_ARG, "nested deeper");
}

/* ---- random walks --------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

typedef struct vocab {
    char **piece;
    size_t *len;
    int n, cap;
} vocab;

static void vocab_add(vocab *v, const char *p, size_t n)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 256;
        v->piece = realloc(v->piece, (size_t)v->cap * sizeof *v->piece);
        v->len = realloc(v->len, (size_t)v->cap * sizeof *v->len);
        assert_non_null(v->piece);
        assert_non_null(v->len);
    }
    v->piece[v->n] = malloc(n + 1);
    assert_non_null(v->piece[v->n]);
    memcpy(v->piece[v->n], p, n);
    v->piece[v->n][n] = '\0';
    v->len[v->n++] = n;
}

static void vocab_free(vocab *v)
{
    for (int i = 0; i < v->n; i++) {
        free(v->piece[i]);
    }
    free(v->piece);
    free(v->len);
    memset(v, 0, sizeof *v);
}

/* JSON punctuation, digits, letters, quotes, blanks, escapes, UTF-8 (whole and split), a raw
 * control byte, and the keys and enum texts of the test schemas. */
static vocab synthetic_vocab(void)
{
    static const char *const pieces[] = {
        "{",         "}",
        "[",         "]",
        ",",         ":",
        "\"",        " ",
        "  ",        "\n",
        "\t",        "{\"",
        "\":",       "\",",
        "\"}",       "\"]",
        "[\"",       "\": ",
        ", ",        "},",
        "],",        "[]",
        "{}",        "0",
        "1",         "9",
        "12",        "-",
        ".",         "e",
        "E",         "+",
        "-1",        "0.",
        "1e",        "true",
        "false",     "null",
        "tr",        "ue",
        "nu",        "ll",
        "hello",     " world",
        "\\",        "\\n",
        "\\\"",      "\\u",
        "00",        "e9",
        "d83d",      "\\ude00",
        "\\ud800",   "dc00",
        "D800",      "\\/",
        "\xc3\xa9",  "\xf0\x9f\x98\x80",
        "\xc3",      "\xa9",
        "\xe2\x82",  "\xac",
        "\x01",      "\x7f",
        "\"name\"",  "\"age\"",
        "name",      "age",
        "\"tags\"",  "tags",
        "\"color\"", "\"red\"",
        "red",       "green",
        "\"blue\"",  "\"ok\"",
        "\"id\"",    "\"kids\"",
        "kids",      "id",
        "\":\"",     "\":[",
        "\":{",      "1,",
        "0]",        "0}",
    };
    vocab v = {0};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        vocab_add(&v, pieces[i], strlen(pieces[i]));
    }
    for (int c = 'a'; c <= 'z'; c++) { /* every letter and hex digit alone: no dead ends */
        char p[2] = {(char)c, 0};
        vocab_add(&v, p, 1);
        p[0] = (char)(c - 'a' + 'A');
        vocab_add(&v, p, 1);
    }
    for (int c = '2'; c <= '8'; c++) {
        char p[2] = {(char)c, 0};
        vocab_add(&v, p, 1);
    }
    return v;
}

/* Pieces preferred once a walk is long, so that most walks finish. */
static bool is_closing(const char *p)
{
    return strcmp(p, "}") == 0 || strcmp(p, "]") == 0 || strcmp(p, "\"") == 0 ||
           strcmp(p, "0") == 0 || strcmp(p, "null") == 0 || strcmp(p, "\"}") == 0 ||
           strcmp(p, "\"]") == 0 || strcmp(p, "0]") == 0 || strcmp(p, "0}") == 0 ||
           strcmp(p, "true") == 0 || strcmp(p, "[]") == 0 || strcmp(p, "{}") == 0;
}

/* allows(piece) after `text` must equal feeding the piece byte by byte to a fresh replay (the
 * shortcuts of allows() against the automaton itself). */
static void check_allows_consistent(const char *schema, const char *text, size_t n,
                                    const pti_json_matcher *m, const char *p, size_t pn)
{
    pti_json_matcher *r = new_matcher(schema);
    pti_json_matcher_advance(r, text, n);
    bool slow = true;
    for (size_t i = 0; i < pn && slow; i++) {
        slow = pti_json_matcher_allows(r, p + i, 1);
        if (slow) {
            pti_json_matcher_advance(r, p + i, 1);
        }
    }
    if (slow != pti_json_matcher_allows(m, p, pn)) {
        fail_msg("allows(%.*s) after %.*s: %d, byte by byte: %d", (int)pn, p, (int)n, text, !slow,
                 slow);
    }
    pti_json_matcher_free(r);
}

typedef void (*doc_check)(const cJSON *doc);

/* Walks from the start picking random allowed pieces until done() (or a length bound);
 * returns the number of walks that finished, each parsed by cJSON and checked. */
static int random_walks(const char *schema, doc_check check, int walks, uint64_t seed)
{
    vocab v = synthetic_vocab();
    int *allowed = malloc((size_t)v.n * sizeof *allowed);
    int *closing = malloc((size_t)v.n * sizeof *closing);
    char text[2048];
    int finished = 0;
    for (int w = 0; w < walks; w++) {
        pti_json_matcher *m = new_matcher(schema);
        size_t n = 0;
        int steps = 0;
        while (!pti_json_matcher_done(m) && n < 1500) {
            int na = 0, nc = 0;
            for (int i = 0; i < v.n; i++) {
                if (pti_json_matcher_allows(m, v.piece[i], v.len[i])) {
                    allowed[na++] = i;
                    if (is_closing(v.piece[i])) {
                        closing[nc++] = i;
                    }
                }
            }
            if (na == 0) {
                fail_msg("dead end after %.*s", (int)n, text);
            }
            /* the ways out are taken more often as the text grows */
            bool close = nc > 0 && (int)(rng_next(&seed) % 400) < (int)n;
            int pick = close ? closing[rng_next(&seed) % (uint64_t)nc]
                             : allowed[rng_next(&seed) % (uint64_t)na];
            if (steps++ % 7 == 0) {
                int other = (int)(rng_next(&seed) % (uint64_t)v.n);
                check_allows_consistent(schema, text, n, m, v.piece[other], v.len[other]);
            }
            /* no raw control byte or broken UTF-8 is ever allowed where it would stay */
            memcpy(text + n, v.piece[pick], v.len[pick]);
            n += v.len[pick];
            pti_json_matcher_advance(m, v.piece[pick], v.len[pick]);
        }
        if (pti_json_matcher_done(m)) {
            finished++;
            assert_true(pti_json_matcher_complete(m));
            text[n] = '\0';
            const char *end = NULL;
            cJSON *doc = cJSON_ParseWithOpts(text, &end, true);
            if (!doc) {
                fail_msg("cJSON cannot parse a finished walk: %s", text);
            }
            for (size_t i = 0; i < n; i++) {
                assert_true((uint8_t)text[i] >= 0x20 || text[i] == '\n' || text[i] == '\t' ||
                            text[i] == '\r');
            }
            if (check) {
                check(doc);
            }
            if (finished <= 2) {
                print_message("walk %d: %s\n", w, text);
            }
            cJSON_Delete(doc);
        }
        pti_json_matcher_free(m);
    }
    free(allowed);
    free(closing);
    vocab_free(&v);
    return finished;
}

static bool is_integer(const cJSON *j)
{
    return cJSON_IsNumber(j) && j->valuedouble == (double)(long long)j->valuedouble;
}

#define PERSON_SCHEMA                                                                              \
    "{\"type\":\"object\",\"properties\":{\"tags\":{\"type\":\"array\",\"items\":{\"type\":"       \
    "\"string\"},\"maxItems\":3},\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"   \
    "\"color\":{\"enum\":[\"red\",\"green\",\"blue\"]},\"ok\":{\"type\":\"boolean\"}},"            \
    "\"required\":[\"name\",\"age\"]}"

static void check_person(const cJSON *doc)
{
    assert_true(cJSON_IsObject(doc));
    /* required first (name, age in properties order), then optional ones in order */
    static const char *const order[] = {"name", "age", "tags", "color", "ok"};
    int at = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, doc)
    {
        while (at < 5 && strcmp(order[at], e->string) != 0) {
            assert_true(at >= 1); /* name and age cannot be skipped */
            at++;
        }
        assert_true(at < 5);
        if (at == 0) {
            assert_true(cJSON_IsString(e));
        } else if (at == 1) {
            assert_true(is_integer(e));
        } else if (at == 2) {
            assert_true(cJSON_IsArray(e));
            assert_true(cJSON_GetArraySize(e) <= 3);
            const cJSON *x;
            cJSON_ArrayForEach(x, e)
            {
                assert_true(cJSON_IsString(x));
            }
        } else if (at == 3) {
            assert_true(cJSON_IsString(e));
            const char *c = e->valuestring;
            assert_true(!strcmp(c, "red") || !strcmp(c, "green") || !strcmp(c, "blue"));
        } else {
            assert_true(cJSON_IsBool(e));
        }
        at++;
    }
    assert_non_null(cJSON_GetObjectItemCaseSensitive(doc, "name"));
    assert_non_null(cJSON_GetObjectItemCaseSensitive(doc, "age"));
}

#define TREE_SCHEMA                                                                                \
    "{\"$defs\":{\"item\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"     \
    "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/item\"},\"maxItems\":2}},"         \
    "\"required\":[\"id\"]}},\"anyOf\":[{\"$ref\":\"#/$defs/item\"},{\"type\":\"null\"},"          \
    "{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,\"maxItems\":2}]}"

static void check_item(const cJSON *doc)
{
    assert_true(cJSON_IsObject(doc));
    const cJSON *id = doc->child;
    assert_non_null(id);
    assert_string_equal(id->string, "id");
    assert_true(is_integer(id));
    const cJSON *kids = id->next;
    if (kids) {
        assert_string_equal(kids->string, "kids");
        assert_null(kids->next);
        assert_true(cJSON_IsArray(kids));
        assert_true(cJSON_GetArraySize(kids) <= 2);
        const cJSON *k;
        cJSON_ArrayForEach(k, kids)
        {
            check_item(k);
        }
    }
}

static void check_tree(const cJSON *doc)
{
    if (cJSON_IsNull(doc)) {
        return;
    }
    if (cJSON_IsArray(doc)) {
        int n = cJSON_GetArraySize(doc);
        assert_true(n >= 1 && n <= 2);
        const cJSON *x;
        cJSON_ArrayForEach(x, doc)
        {
            assert_true(cJSON_IsNumber(x));
        }
        return;
    }
    check_item(doc);
}

/* allows() of a whole byte string equals feeding it byte by byte, for random byte strings
 * (biased towards JSON's bytes) fed to matchers in many states, dead ones included. */
static void test_random_bytes(void **state)
{
    (void)state;
    static const char alphabet[] = "{}[],:\"\\ \n0123456789-+.eEtrufalsnbuxd\xc3\xa9\xed\xa0\x01";
    const char *schemas[] = {NULL, PERSON_SCHEMA, TREE_SCHEMA, ORDER_SCHEMA};
    uint64_t seed = 2024;
    for (size_t si = 0; si < sizeof schemas / sizeof schemas[0]; si++) {
        for (int iter = 0; iter < 400; iter++) {
            pti_json_matcher *m = new_matcher(schemas[si]);
            char hist[8 * 24];
            size_t hn = 0;
            for (int chunk = 0; chunk < 8; chunk++) {
                char buf[24];
                size_t n = 1 + rng_next(&seed) % sizeof buf;
                for (size_t i = 0; i < n; i++) {
                    buf[i] = alphabet[rng_next(&seed) % (sizeof alphabet - 1)];
                }
                bool whole = pti_json_matcher_allows(m, buf, n);
                size_t ok = 0;
                while (ok < n && pti_json_matcher_allows(m, buf, ok + 1)) {
                    ok++;
                }
                assert_int_equal(whole, ok == n);
                check_allows_consistent(schemas[si], hist, hn, m, buf, n);
                /* take the accepted prefix (sometimes all of it, sometimes a refused byte) */
                size_t take = rng_next(&seed) % 8 == 0 ? n : ok;
                pti_json_matcher_advance(m, buf, take);
                memcpy(hist + hn, buf, take);
                hn += take;
                if (take > ok) {
                    assert_false(pti_json_matcher_allows(m, " ", 1));
                    assert_false(pti_json_matcher_complete(m));
                    break;
                }
            }
            pti_json_matcher_free(m);
        }
    }
}

/* More ambiguity than the live-reading bound: the matcher keeps PTI_JSON_MAX_ALTS readings
 * and what it accepts stays valid. */
static void test_union_bound(void **state)
{
    (void)state;
    char schema[4096] = "{\"anyOf\":[";
    for (int i = 0; i < 8; i++) {
        char alt[512] = "{\"type\":\"array\",\"items\":{\"anyOf\":[";
        for (int k = 0; k < 8; k++) {
            char e[64];
            snprintf(e, sizeof e, "%s{\"enum\":[\"a%d\",%d]}", k ? "," : "", k, i);
            strcat(alt, e);
        }
        strcat(alt, "]}}");
        strcat(schema, i ? "," : "");
        strcat(schema, alt);
    }
    strcat(schema, "]}");
    expect_valid(schema, "[\"a0\",0]", 1);
    expect_valid(schema, "[]", 1);
    int done = random_walks(schema, NULL, 100, 31337);
    assert_true(done >= 90);
}

static void test_random_walks(void **state)
{
    (void)state;
    int a = random_walks(NULL, NULL, 300, 0x9e3779b97f4a7c15ull);
    int b = random_walks(PERSON_SCHEMA, check_person, 300, 12345);
    int c = random_walks(TREE_SCHEMA, check_tree, 300, 777);
    print_message("random walks finished: any %d/300, person %d/300, tree %d/300\n", a, b, c);
    assert_true(a >= 250);
    assert_true(b >= 250);
    assert_true(c >= 250);
}

/* ---- the real SmolLM2 vocabulary ------------------------------------------------------------ */

#define SMOL "SmolLM2-135M-Instruct.Q4_1"
#define GEMMA "gemma-3-270m-q4_k_m"

/* The model in $PT_MODELS_DIR (pt_test_model_path: the running test fails without it). */
static bool find_model(const char *stem, char *out, size_t cap)
{
    char file[256];
    snprintf(file, sizeof file, "%s.gguf", stem);
    snprintf(out, cap, "%s", pt_test_model_path(file));
    return true;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The fastest of a few scans of the whole vocabulary, in microseconds; *n_allowed counts. */
static double scan_us(const pti_json_matcher *m, const vocab *v, int *n_allowed)
{
    double best = 1e18;
    for (int rep = 0; rep < 5; rep++) {
        int cnt = 0;
        double t0 = now_us();
        for (int i = 0; i < v->n; i++) {
            cnt += pti_json_matcher_allows(m, v->piece[i], v->len[i]);
        }
        double t = now_us() - t0;
        best = t < best ? t : best;
        *n_allowed = cnt;
    }
    return best;
}

/* Every token's piece (llama_token_to_piece with special=false) of a model's vocabulary. */
static bool model_vocab(const char *stem, vocab *v)
{
    char path[4096];
    if (!find_model(stem, path, sizeof path))
        return false; /* not reached: find_model fails the test */
    pt_gguf *g = pt_gguf_open(path);
    assert_non_null(g);
    pti_tokenizer *tok = pti_tokenizer_from_gguf(g);
    assert_non_null(tok);
    memset(v, 0, sizeof *v);
    char buf[1024];
    for (int32_t id = 0;; id++) {
        int32_t len = pti_token_to_piece(tok, id, false, buf, sizeof buf);
        if (len < 0) {
            break;
        }
        assert_true(len <= (int32_t)sizeof buf);
        vocab_add(v, buf, (size_t)len);
    }
    pti_tokenizer_free(tok);
    pt_gguf_close(g);
    return true;
}

/* Times full scans at a few states and checks the shortcuts of allows() on a sample of tokens;
 * returns the slowest scan in microseconds. */
static double scan_states(const char *stem, const vocab *v)
{
    static const struct {
        const char *name, *schema, *prefix;
    } states[] = {
        {"start", NULL, ""},
        {"in a string", NULL, "{\"name\": \"ab"},
        {"after a key", NULL, "{\"name\""},
        {"after a colon", NULL, "{\"name\":"},
        {"in a number", NULL, "[12"},
        {"schema: start", PERSON_SCHEMA, ""},
        {"schema: key", PERSON_SCHEMA, "{\"name\":\"x\", "},
        {"schema: in a string", PERSON_SCHEMA, "{\"name\":\"x y"},
        {"schema: enum", PERSON_SCHEMA, "{\"name\":\"x\",\"age\":3,\"color\":"},
    };
    double worst = 0;
    uint64_t seed = 99;
    for (size_t s = 0; s < sizeof states / sizeof states[0]; s++) {
        pti_json_matcher *m = new_matcher(states[s].schema);
        size_t pn = strlen(states[s].prefix);
        assert_int_equal(feed(m, states[s].prefix, pn), -1);
        int n_allowed = 0;
        double us = scan_us(m, v, &n_allowed);
        worst = us > worst ? us : worst;
        print_message("%s: full-vocabulary scan (%d tokens) %-20s %7.0f us, %6d allowed\n", stem,
                      v->n, states[s].name, us, n_allowed);
        assert_true(n_allowed > 0);
        for (int k = 0; k < 300; k++) {
            int i = (int)(rng_next(&seed) % (uint64_t)v->n);
            check_allows_consistent(states[s].schema, states[s].prefix, pn, m, v->piece[i],
                                    v->len[i]);
        }
        pti_json_matcher_free(m);
    }
    print_message("%s: slowest full-vocabulary scan %.0f us\n", stem, worst);
    return worst;
}

static void test_real_vocabulary(void **state)
{
    (void)state;
    vocab v;
    if (!model_vocab(SMOL, &v)) {
        skip();
    }
    assert_true(v.n > 40000);
    double worst = scan_states(SMOL, &v);
    /* generous even under sanitizers and a loaded machine; the figure itself is printed */
    assert_true(worst < 100000);
    /* the real pieces lead to valid documents too */
    uint64_t seed = 4242;
    int *allowed = malloc((size_t)v.n * sizeof *allowed);
    int *closing = malloc((size_t)v.n * sizeof *closing);
    int finished = 0;
    for (int w = 0; w < 20; w++) {
        pti_json_matcher *m = new_matcher(PERSON_SCHEMA);
        char text[4096];
        size_t n = 0;
        while (!pti_json_matcher_done(m) && n < 600) {
            int na = 0, nc = 0;
            for (int i = 0; i < v.n; i++) {
                if (v.len[i] > 0 && pti_json_matcher_allows(m, v.piece[i], v.len[i])) {
                    allowed[na++] = i;
                    if (is_closing(v.piece[i])) {
                        closing[nc++] = i;
                    }
                }
            }
            if (na == 0) {
                fail_msg("dead end after %.*s", (int)n, text);
            }
            /* the ways out are taken more often as the text grows; blank runs seldom */
            bool close = nc > 0 && (int)(rng_next(&seed) % 300) < (int)n;
            int pick = close ? closing[rng_next(&seed) % (uint64_t)nc]
                             : allowed[rng_next(&seed) % (uint64_t)na];
            for (int tries = 0; tries < 4 && strspn(v.piece[pick], " \t\r\n") == v.len[pick];
                 tries++) {
                pick = allowed[rng_next(&seed) % (uint64_t)na];
            }
            if (n + v.len[pick] >= sizeof text) {
                break;
            }
            memcpy(text + n, v.piece[pick], v.len[pick]);
            n += v.len[pick];
            pti_json_matcher_advance(m, v.piece[pick], v.len[pick]);
        }
        if (pti_json_matcher_done(m)) {
            text[n] = '\0';
            cJSON *doc = cJSON_ParseWithOpts(text, NULL, true);
            if (!doc) {
                fail_msg("cJSON cannot parse %s", text);
            }
            check_person(doc);
            cJSON_Delete(doc);
            if (finished++ == 0) {
                print_message("a walk over SmolLM2 pieces: %s\n", text);
            }
        }
        pti_json_matcher_free(m);
    }
    free(allowed);
    free(closing);
    print_message("SmolLM2 walks finished: %d/20\n", finished);
    assert_true(finished >= 15);
    vocab_free(&v);
}

/* Gemma 3's 262k-token vocabulary, mostly multilingual: the slow path's worst case. */
static void test_gemma_vocabulary(void **state)
{
    (void)state;
    vocab v;
    if (!model_vocab(GEMMA, &v)) {
        skip();
    }
    assert_true(v.n > 200000);
    assert_true(scan_states(GEMMA, &v) < 500000);
    vocab_free(&v);
}

/* The tokens llama.cpp's grammars/json.gbnf allows after each probe prefix, as llama.cpp's
 * grammar sampler decided them over SmolLM2's vocabulary (tests/fixtures/
 * json_format_llamacpp_sets.txt, written by tests/fixtures/gen_json_format_llamacpp.py), against
 * the matcher of format "json" ({"type":"object"}). Tokens without text (control tokens) are
 * left out: the engine takes them only where the text is complete, and llama.cpp's grammar
 * reads them by their special text. */
static int hex_nibble(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static size_t unhex(const char *hex, char *out, size_t cap)
{
    size_t n = 0;
    if (strcmp(hex, "-") == 0) {
        return 0;
    }
    for (; hex[0] && hex[1] && n < cap; hex += 2) {
        out[n++] = (char)(hex_nibble(hex[0]) * 16 + hex_nibble(hex[1]));
    }
    return n;
}

/* The two documented differences (json_constraint.h): llama.cpp's \\uXXXX takes any four hex
 * digits, we refuse a lone low surrogate (\\udc00-\\udfff: not a character); json.gbnf's
 * exponent `[0-9] [1-9]{0,15}` refuses a 0 after its first digit, which is valid JSON we take. */
static bool known_difference(const char *prefix, size_t pn, const char *p, size_t n, bool ours)
{
    char last = pn ? prefix[pn - 1] : 0;
    if (!ours && last == '\\' && n >= 3 && p[0] == 'u' && (p[1] == 'd' || p[1] == 'D') &&
        strchr("cdefCDEF", p[2])) {
        return true;
    }
    const char *e = memchr(prefix, 'e', pn);
    return ours && e && last >= '0' && last <= '9' && e < prefix + pn - 1 && p[0] == '0';
}

static int compare_probe(const vocab *v, const char *prefix, size_t pn, const bool *listed,
                         bool listed_allowed, int *known)
{
    pti_json_matcher *m = new_matcher("{\"type\":\"object\"}");
    pti_json_matcher_advance(m, prefix, pn);
    int bad = 0;
    for (int i = 0; i < v->n; i++) {
        if (v->len[i] == 0) {
            continue;
        }
        bool ours = pti_json_matcher_allows(m, v->piece[i], v->len[i]);
        bool theirs = listed[i] == listed_allowed;
        if (ours != theirs && known_difference(prefix, pn, v->piece[i], v->len[i], ours)) {
            (*known)++;
            continue;
        }
        if (ours != theirs && bad++ < 8) {
            print_message("after %.*s: token %d %.*s: ours %s, llama.cpp %s\n", (int)pn, prefix, i,
                          (int)v->len[i], v->piece[i], ours ? "allows" : "refuses",
                          theirs ? "allows" : "refuses");
        }
    }
    pti_json_matcher_free(m);
    return bad;
}

static void test_llamacpp_token_sets(void **state)
{
    (void)state;
    vocab v;
    if (!model_vocab(SMOL, &v)) {
        skip();
    }
    FILE *f = fopen(PT_FIXTURES_DIR "/json_format_llamacpp_sets.txt", "r");
    assert_non_null(f);
    bool *listed = malloc((size_t)v.n * sizeof *listed);
    assert_non_null(listed);
    char *line = NULL;
    size_t cap = 0;
    int probes = 0, bad_probes = 0, known = 0;
    while (getline(&line, &cap, f) > 0) {
        char hex[512], kind[16];
        int count, off;
        if (line[0] == '#' || sscanf(line, "probe %511s %15s %d%n", hex, kind, &count, &off) != 3) {
            continue;
        }
        memset(listed, 0, (size_t)v.n * sizeof *listed);
        char *p = line + off;
        for (int k = 0; k < count; k++) {
            long id = strtol(p, &p, 10);
            assert_true(id >= 0 && id < v.n);
            listed[id] = true;
        }
        char prefix[256];
        size_t pn = unhex(hex, prefix, sizeof prefix);
        int bad = compare_probe(&v, prefix, pn, listed, strcmp(kind, "allowed") == 0, &known);
        if (bad) {
            print_message("after %.*s: %d tokens differ from llama.cpp's json.gbnf\n", (int)pn,
                          prefix, bad);
        }
        bad_probes += bad > 0;
        probes++;
    }
    free(line);
    fclose(f);
    free(listed);
    vocab_free(&v);
    print_message("llama.cpp token sets: %d probes, %d differ (and %d tokens the documented "
                  "differences)\n",
                  probes, bad_probes, known);
    assert_true(probes >= 30);
    assert_int_equal(bad_probes, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_documents),
        cmocka_unit_test(test_invalid_documents),
        cmocka_unit_test(test_whitespace_bound),
        cmocka_unit_test(test_complete_and_done),
        cmocka_unit_test(test_engine_interface),
        cmocka_unit_test(test_schema_required_and_order),
        cmocka_unit_test(test_schema_enum_const),
        cmocka_unit_test(test_schema_types),
        cmocka_unit_test(test_schema_nested_arrays),
        cmocka_unit_test(test_schema_any_of),
        cmocka_unit_test(test_schema_ref),
        cmocka_unit_test(test_schema_errors),
        cmocka_unit_test(test_random_walks),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_union_bound),
        cmocka_unit_test(test_real_vocabulary),
        cmocka_unit_test(test_gemma_vocabulary),
        cmocka_unit_test(test_llamacpp_token_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
