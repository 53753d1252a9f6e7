/* The public server and model-store API (include/prometorch/server.h, model_store.h) through
 * the shared library: option checks and errors, a start on a free port and a stop, durations,
 * and the store functions on an empty and a missing store. With a library built without the
 * server (PT_WITH_SERVER off), pt_server_start must fail with PT_ERR_UNSUPPORTED instead.
 * Expected numbers: Ollama's format package (HumanBytes, HumanNumber) and Go's durations. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <prometorch/model_store.h>
#include <prometorch/server.h>

#include "testutil.h"

static void test_bad_options(void **state)
{
    (void)state;
    pt_server_opts o = {0};
    o.port = 70000;
    assert_null(pt_server_start(&o));
    if (!pt_server_available()) {
        assert_int_equal(pt_last_status(), PT_ERR_UNSUPPORTED);
        return;
    }
    assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
    assert_non_null(strstr(pt_last_error(), "opts.port"));
    o.port = 0;
    o.n_model_paths = 1; /* and no array */
    assert_null(pt_server_start(&o));
    assert_int_equal(pt_last_status(), PT_ERR_NULL);
    pt_server_stop(NULL); /* does nothing */
    assert_int_equal(pt_server_port(NULL), -1);
    assert_null(pt_server_host(NULL));
}

static void test_start_stop_free_port(void **state)
{
    (void)state;
    char store[] = "/tmp/pt_server_api_XXXXXX";
    assert_non_null(mkdtemp(store));
    pt_server_opts o = {0};
    o.models_store = store;
    o.quiet = true;
    pt_server *s = pt_server_start(&o);
    if (!pt_server_available()) {
        assert_null(s);
        assert_int_equal(pt_last_status(), PT_ERR_UNSUPPORTED);
    } else {
        assert_non_null(s);
        assert_true(pt_server_port(s) > 0); /* port 0: the one the system picked */
        assert_string_equal(pt_server_host(s), "127.0.0.1");
        pt_server_stop(s);
    }
    rmdir(store);
}

/* ---- store warnings into the log callback ---- */

typedef struct log_capture {
    pthread_mutex_t lock;
    char text[8192];
    int n_warn;
} log_capture;

static void capture_log(void *user, pt_log_level level, const char *msg)
{
    log_capture *c = user;
    pthread_mutex_lock(&c->lock);
    if (level == PT_LOG_WARN) {
        c->n_warn++;
        size_t len = strlen(c->text);
        snprintf(c->text + len, sizeof c->text - len, "%s\n", msg);
    }
    pthread_mutex_unlock(&c->lock);
}

/* GET path on 127.0.0.1:port; the status line's code (-1 when no reply came). */
static int http_get_status(int port, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char req[256], reply[512] = "";
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    int code = -1;
    if (write(fd, req, (size_t)n) == n && read(fd, reply, sizeof reply - 1) > 12)
        code = atoi(reply + 9); /* "HTTP/1.x NNN" */
    close(fd);
    return code;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_store_warnings_reach_log(void **state)
{
    (void)state;
    if (!pt_server_available())
        skip();
    char store[] = "/tmp/pt_server_warn_XXXXXX", dir[256], man[320];
    assert_non_null(mkdtemp(store));
    const char *parts[] = {"manifests", "registry.ollama.ai", "library", "broken"};
    snprintf(dir, sizeof dir, "%s", store);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        size_t len = strlen(dir);
        snprintf(dir + len, sizeof dir - len, "/%s", parts[i]);
        assert_int_equal(mkdir(dir, 0755), 0);
    }
    snprintf(man, sizeof man, "%s/latest", dir);
    write_file(man, "{ not json");
    log_capture cap = {.lock = PTHREAD_MUTEX_INITIALIZER};
    pt_server_opts o = {0};
    o.models_store = store;
    o.log = capture_log;
    o.log_user = &cap;
    pt_server *s = pt_server_start(&o);
    assert_non_null(s);
    /* the start-up prune refuses to guess with a corrupt manifest, and says so in the log */
    pthread_mutex_lock(&cap.lock);
    int warned_at_start = cap.n_warn;
    bool prune_line = strstr(cap.text, "model store: a manifest is corrupt") != NULL;
    pthread_mutex_unlock(&cap.lock);
    /* a listing skips it, with a warning naming the file, in the same log */
    int code = http_get_status(pt_server_port(s), "/api/tags");
    pt_server_stop(s);
    print_message("  log warnings:\n%s", cap.text);
    assert_true(warned_at_start >= 1);
    assert_true(prune_line);
    assert_int_equal(code, 200);
    assert_true(cap.n_warn > warned_at_start);
    assert_non_null(strstr(cap.text, "model store: skipping "));
    assert_non_null(strstr(cap.text, "broken"));
    unlink(man);
    for (int i = 3; i >= 0; i--) { /* the directories made above, deepest first */
        rmdir(dir);
        *strrchr(dir, '/') = '\0';
    }
    rmdir(store);
}

static void test_durations(void **state)
{
    (void)state;
    int64_t ns = 0;
    assert_true(pt_server_parse_duration("5m", &ns));
    assert_true(ns == 300LL * 1000000000);
    assert_true(pt_server_parse_duration("1h30m", &ns));
    assert_true(ns == 5400LL * 1000000000);
    assert_true(pt_server_parse_duration("-1", &ns));
    assert_true(ns < 0);
    assert_false(pt_server_parse_duration("5 parsecs", &ns));
    assert_int_equal(pt_last_status(), PT_ERR_INVALID_ARG);
    assert_false(pt_server_parse_duration(NULL, &ns));
    assert_int_equal(pt_last_status(), PT_ERR_NULL);
}

static void test_store_functions(void **state)
{
    (void)state;
    char store[] = "/tmp/pt_store_api_XXXXXX";
    assert_non_null(mkdtemp(store));
    char *list = pt_model_store_list(store, NULL);
    assert_non_null(list);
    assert_string_equal(list, "[]");
    free(list);
    assert_null(pt_model_store_show(store, "nosuch:latest", false));
    assert_int_equal(pt_last_status(), PT_ERR_IO);
    assert_non_null(strstr(pt_last_error(), "not found"));
    assert_false(pt_model_store_delete(store, "nosuch"));
    assert_false(pt_model_store_copy(store, "nosuch", "other"));
    assert_false(pt_model_store_copy(store, NULL, "other"));
    assert_int_equal(pt_last_status(), PT_ERR_NULL);
    assert_null(pt_model_store_show_file(NULL, NULL, false));
    assert_int_equal(pt_last_status(), PT_ERR_NULL);
    rmdir(store);
}

static void test_formats(void **state)
{
    (void)state;
    char b[32];
    pt_format_bytes(91000000, b, sizeof b);
    assert_string_equal(b, "91 MB");
    pt_format_bytes(1500000000, b, sizeof b);
    assert_string_equal(b, "1.5 GB");
    pt_format_count(7000000000ULL, b, sizeof b);
    assert_string_equal(b, "7B");
    pt_format_count(134520000ULL, b, sizeof b);
    assert_string_equal(b, "134.52M");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_options, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_start_stop_free_port, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_durations, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_store_functions, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_formats, pt_test_setup, pt_test_teardown),
        cmocka_unit_test_setup_teardown(test_store_warnings_reach_log, pt_test_setup,
                                        pt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
