/* The helpers plugin of conformance/helpers/SPEC.md in C: every native
 * helper (`sluice:plugin/helpers`) through the SDK's functions, and the
 * attacks the host must bound. */
#include <stdlib.h>
#include <string.h>

#include "sluice_plugin.h"

static sluice_time_format time_format;
static sluice_patterns patterns;

#define MAX_PAIRS 32
typedef struct {
    size_t n;
    char *name[MAX_PAIRS];
    char *value[MAX_PAIRS]; /* NULL: a bare key */
} pairs;

static char *copy(sluice_bytes b) {
    char *s = malloc(b.len + 1);
    if (!s) abort();
    memcpy(s, b.ptr, b.len);
    s[b.len] = 0;
    return s;
}

static void add_pair(void *ctx, sluice_bytes name, const sluice_bytes *value) {
    pairs *p = ctx;
    /* A later key replaces an earlier one, as in the other SDKs. */
    for (size_t i = 0; i < p->n; i++) {
        if (strlen(p->name[i]) == name.len && memcmp(p->name[i], name.ptr, name.len) == 0) {
            free(p->value[i]);
            p->value[i] = value ? copy(*value) : NULL;
            return;
        }
    }
    if (p->n == MAX_PAIRS) return;
    p->name[p->n] = copy(name);
    p->value[p->n] = value ? copy(*value) : NULL;
    p->n++;
}

static const char *get(const pairs *p, const char *name, const char *absent) {
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->name[i], name) == 0) return p->value[i] ? p->value[i] : absent;
    return absent;
}

static void add_capture(void *ctx, sluice_bytes name, const sluice_bytes *value) {
    sluice_buf *body = ctx;
    sluice_json_key_n(body, (const char *)name.ptr, name.len);
    sluice_json_string(body, (const char *)value->ptr, value->len);
}

static const char *setup(const char *config) {
    static sluice_buf error;
    char *zone = NULL;
    if (sluice_config_string(config, "zone", &zone) < 0) return "zone: a time zone name or offset, as a string";
    sluice_buf spec = {0};
    sluice_json_open(&spec);
    sluice_json_key(&spec, "format");
    sluice_json_string(&spec, "%Y-%m-%d %H:%M:%S", 17);
    if (zone) {
        sluice_json_key(&spec, "zone");
        sluice_json_string(&spec, zone, strlen(zone));
        free(zone);
    }
    sluice_json_close(&spec);
    sluice_buf_push(&spec, "", 1);
    sluice_buf_clear(&error);
    bool ok = sluice_time_format_compile(spec.ptr, &time_format, &error);
    sluice_buf_free(&spec);
    const char *list[] = {"^%{INT:pid} %{LOGLEVEL:level} %{GREEDYDATA:msg}$", "^%{GREEDYDATA:other}$"};
    if (ok) ok = sluice_patterns_compile(list, 2, &patterns, &error);
    if (ok) return NULL;
    sluice_buf_push(&error, "", 1);
    return error.ptr;
}

static void attack(const char *kind, const pairs *p, sluice_out *out) {
    sluice_buf body = {0}, error = {0};
    if (strcmp(kind, "pattern") == 0) {
        const char *list[] = {"^(a+)+$"};
        sluice_patterns set;
        if (!sluice_patterns_compile(list, 1, &set, &error)) abort();
        size_t n = 100000;
        char *line = malloc(n + 1);
        if (!line) abort();
        memset(line, 'a', n);
        line[n] = '!';
        int m = sluice_patterns_match(set, line, n + 1, add_capture, &body);
        free(line);
        sluice_patterns_free(set);
        sluice_buf_clear(&body);
        sluice_json_open(&body);
        sluice_json_key(&body, "matched");
        sluice_json_raw(&body, m >= 0 ? "true" : "false");
        sluice_json_close(&body);
        sluice_emit(out, &(sluice_event){.body = body.ptr, .body_len = body.len});
    } else if (strcmp(kind, "path") == 0) {
        size_t n = 10000;
        char *path = malloc(2 * n + 2);
        if (!path) abort();
        for (size_t i = 0; i < n; i++) memcpy(path + 2 * i, "a.", 2);
        memcpy(path + 2 * n, "a", 2);
        bool found;
        if (sluice_json_get((sluice_bytes){(const uint8_t *)"{}", 2}, path, &body, &found, &error))
            sluice_drop(out, "no error");
        else
            sluice_reject(out, "%.*s", (int)error.len, error.ptr);
        free(path);
    } else if (strcmp(kind, "flood") == 0) {
        sluice_time_format kept[1000];
        size_t n = 0;
        while (n < 1000 && sluice_time_format_compile("rfc3339", &kept[n], &error)) n++;
        if (n < 1000)
            sluice_reject(out, "after %zu: %.*s", n, (int)error.len, error.ptr);
        else
            sluice_drop(out, "no cap");
        for (size_t i = 0; i < n; i++) sluice_time_format_free(kept[i]);
    } else if (strcmp(kind, "payload") == 0) {
        size_t size = (size_t)atoi(get(p, "mib", "64")) << 20;
        uint8_t *payload = malloc(size + 8);
        if (!payload) abort();
        memcpy(payload, "{\"a\":\"", 6);
        memset(payload + 6, 'x', size);
        memcpy(payload + 6 + size, "\"}", 2);
        bool found = true;
        sluice_buf value = {0};
        bool ok = sluice_json_get((sluice_bytes){payload, size + 8}, "b", &value, &found, &error);
        sluice_buf_free(&value);
        free(payload);
        if (!ok) {
            sluice_reject(out, "%.*s", (int)error.len, error.ptr);
        } else {
            sluice_json_open(&body);
            sluice_json_key(&body, "bytes");
            sluice_json_int(&body, (int64_t)(size + 8));
            sluice_json_key(&body, "found");
            sluice_json_raw(&body, found ? "true" : "false");
            sluice_json_close(&body);
            sluice_emit(out, &(sluice_event){.body = body.ptr, .body_len = body.len});
        }
    } else {
        sluice_reject(out, "unknown attack %s", kind);
    }
    sluice_buf_free(&body);
    sluice_buf_free(&error);
}

static void process(const sluice_record *r, sluice_out *out) {
    pairs p = {0};
    sluice_logfmt(r->payload, add_pair, &p);
    const char *kind = get(&p, "attack", NULL);
    sluice_buf body = {0}, error = {0}, got[2] = {{0}, {0}};
    bool found[2] = {false, false};
    int64_t ns = 0;
    if (kind) {
        attack(kind, &p, out);
        goto done;
    }
    const char *ts = get(&p, "ts", "");
    const char *json = get(&p, "json", "{}");
    sluice_bytes doc = {(const uint8_t *)json, strlen(json)};
    if (!sluice_time_parse(time_format, ts, strlen(ts), &ns, &error) ||
        !sluice_json_get(doc, "a.b", &got[0], &found[0], &error) ||
        !sluice_json_get(doc, "tags.1", &got[1], &found[1], &error)) {
        sluice_reject(out, "%.*s", (int)error.len, error.ptr);
        goto done;
    }
    sluice_json_open(&body);
    sluice_json_key(&body, "pairs");
    sluice_json_open(&body);
    for (size_t i = 0; i < p.n; i++) {
        sluice_json_key(&body, p.name[i]);
        if (p.value[i])
            sluice_json_string(&body, p.value[i], strlen(p.value[i]));
        else
            sluice_json_raw(&body, "true");
    }
    sluice_json_close(&body);
    sluice_json_key(&body, "rfc3339");
    sluice_buf stamp = {0};
    sluice_format_rfc3339(ns, &stamp);
    sluice_json_string(&body, stamp.ptr, stamp.len);
    sluice_buf_free(&stamp);
    /* The captures go into a buffer of their own until the index is known. */
    const char *line = get(&p, "line", "");
    sluice_buf captures = {0};
    sluice_json_open(&captures);
    int m = sluice_patterns_match(patterns, line, strlen(line), add_capture, &captures);
    sluice_json_close(&captures);
    sluice_json_key(&body, "pattern");
    if (m >= 0)
        sluice_json_int(&body, m);
    else
        sluice_json_raw(&body, "null");
    sluice_json_key(&body, "captures");
    if (m >= 0) {
        sluice_buf_push(&captures, "", 1);
        sluice_json_raw(&body, captures.ptr);
    } else {
        sluice_json_raw(&body, "null");
    }
    sluice_buf_free(&captures);
    sluice_json_key(&body, "got");
    sluice_buf_push(&body, "[", 1);
    for (int i = 0; i < 2; i++) {
        if (i) sluice_buf_push(&body, ",", 1);
        if (found[i])
            sluice_buf_push(&body, got[i].ptr, got[i].len);
        else
            sluice_buf_push(&body, "null", 4);
    }
    sluice_buf_push(&body, "]", 1);
    sluice_json_key(&body, "check");
    const char *check = get(&p, "check", "{}");
    sluice_buf why = {0};
    if (sluice_json_object_check((sluice_bytes){(const uint8_t *)check, strlen(check)}, &why))
        sluice_json_raw(&body, "null");
    else
        sluice_json_string(&body, why.ptr, why.len);
    sluice_buf_free(&why);
    sluice_json_close(&body);
    sluice_emit(out, &(sluice_event){.body = body.ptr, .body_len = body.len, .has_timestamp = true, .timestamp = ns});
done:
    for (size_t i = 0; i < p.n; i++) {
        free(p.name[i]);
        free(p.value[i]);
    }
    sluice_buf_free(&body);
    sluice_buf_free(&error);
    sluice_buf_free(&got[0]);
    sluice_buf_free(&got[1]);
}

SLUICE_PLUGIN(setup, process)
