/* promeserve's clocks and Go-style times and durations: monotonic and wall nanoseconds, RFC 3339
 * timestamps as Go prints them, and keep_alive durations ("5m", "1h30m", "-1").
 * Declared in serve_internal.h. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/internal.h"
#include "prometorch/server.h"
#include "serve_internal.h"

int64_t ps_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ps_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void ps_format_time(int64_t wall_ns, char *buf, size_t cap)
{
    time_t sec = (time_t)(wall_ns / 1000000000);
    long nsec = (long)(wall_ns % 1000000000);
    if (nsec < 0) {
        nsec += 1000000000;
        sec -= 1;
    }
    struct tm tm;
    localtime_r(&sec, &tm);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    char frac[16] = "";
    if (nsec) {
        snprintf(frac, sizeof frac, ".%09ld", nsec);
        size_t n = strlen(frac);
        while (n > 1 && frac[n - 1] == '0')
            frac[--n] = 0;
    }
    long off = tm.tm_gmtoff;
    if (off == 0) {
        snprintf(buf, cap, "%s%sZ", date, frac);
        return;
    }
    char sign = off < 0 ? '-' : '+';
    if (off < 0)
        off = -off;
    snprintf(buf, cap, "%s%s%c%02ld:%02ld", date, frac, sign, off / 3600, off / 60 % 60);
}

/* One "<number><unit>" group of a Go duration, in ns. */
static bool parse_duration_unit(const char **p, double *ns)
{
    char *end;
    double v = strtod(*p, &end);
    if (end == *p || v < 0)
        return false;
    static const struct {
        const char *unit;
        double ns;
    } units[] = {{"ns", 1},  {"us", 1e3}, {"\xc2\xb5s", 1e3}, {"ms", 1e6},
                 {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
    /* longest unit first where one is a prefix of another ("ms" before "m") */
    static const int order[] = {0, 1, 2, 3, 4, 6, 5};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const char *u = units[order[i]].unit;
        size_t n = strlen(u);
        if (!strncmp(end, u, n)) {
            *ns += v * units[order[i]].ns;
            *p = end + n;
            return true;
        }
    }
    return false;
}

bool ps_parse_duration(const char *s, int64_t *ns)
{
    if (!s)
        return false;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s)
        return false;
    char *end;
    double plain = strtod(s, &end);
    if (end != s && !*end) { /* plain number: seconds */
        if (plain > 9.2e9 || plain < -9.2e9)
            return false;
        *ns = (int64_t)(plain * 1e9);
        return true;
    }
    bool neg = false;
    const char *p = s;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    if (!strcmp(p, "0")) {
        *ns = 0;
        return true;
    }
    double total = 0;
    while (*p) {
        if (!parse_duration_unit(&p, &total))
            return false;
    }
    if (total > 9.2e18)
        return false;
    *ns = (int64_t)(neg ? -total : total);
    return true;
}

/* The public form (server.h), here so that it exists without the server too. */
bool pt_server_parse_duration(const char *s, int64_t *ns)
{
    if (!s || !ns) {
        pti_error(PT_ERR_NULL, "pt_server_parse_duration: %s is NULL", !s ? "s" : "ns");
        return false;
    }
    if (!ps_parse_duration(s, ns)) {
        pti_error(PT_ERR_INVALID_ARG,
                  "pt_server_parse_duration: \"%s\" is not a duration (\"5m\", \"1h30m\", "
                  "\"1.5s\", \"-1\" or a number of seconds)",
                  s);
        return false;
    }
    return true;
}
