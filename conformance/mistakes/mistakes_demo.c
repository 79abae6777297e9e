/* Every helper of the C SDK given what an author is likely to pass by
 * mistake (conformance/mistakes/README.md). Each record's payload names
 * one mistake; the plugin makes it. A helper that refuses returns false
 * with the mistake named in `error`, and the record is rejected with it;
 * one that takes it (text that is not UTF-8, a NULL callback) answers.
 * None may trap the instance: the SDK checks handles, NULLs and UTF-8
 * before the host sees them. */
#include <string.h>

#include "sluice_plugin.h"

static sluice_time_format day;
static sluice_patterns pid;

static const char *setup(const char *config) {
    (void)config;
    static sluice_buf error;
    const char *one[] = {"^%{INT:pid}"};
    if (!sluice_time_format_compile("%Y-%m-%d", &day, &error) || !sluice_patterns_compile(one, 1, &pid, &error)) {
        sluice_buf_push(&error, "", 1);
        return error.ptr;
    }
    return NULL;
}

static void done(sluice_out *out, const char *name, long long result) {
    sluice_buf body = {0};
    sluice_json_open(&body);
    sluice_json_key(&body, "mistake");
    sluice_json_string(&body, name, strlen(name));
    sluice_json_key(&body, "result");
    sluice_json_int(&body, result);
    sluice_json_close(&body);
    sluice_emit(out, &(sluice_event){.body = body.ptr, .body_len = body.len});
    sluice_buf_free(&body);
}

static bool is(const sluice_record *r, const char *name) {
    size_t n = strlen(name);
    return r->payload.len >= n && memcmp(r->payload.ptr, name, n) == 0 &&
           (r->payload.len == n || r->payload.ptr[n] == ' ');
}

static void process(const sluice_record *r, sluice_out *out) {
    sluice_buf error = {0};
    int64_t nanos = 0;
    bool ok = true, found = false;
    long long result = 0;
    const char *name = "?";
    sluice_buf value = {0};
    if (is(r, "parse-never-compiled")) {
        name = "parse-never-compiled";
        sluice_time_format none = {0};
        ok = sluice_time_parse(none, "2017-05-16", 10, &nanos, &error);
    } else if (is(r, "parse-freed")) {
        name = "parse-freed";
        sluice_time_format f;
        ok = sluice_time_format_compile("%Y", &f, &error);
        sluice_time_format_free(f);
        sluice_time_format_free(f); /* twice: does nothing */
        ok = ok && sluice_time_parse(f, "2017", 4, &nanos, &error);
    } else if (is(r, "parse-null-text")) {
        name = "parse-null-text";
        ok = sluice_time_parse(day, NULL, 10, &nanos, &error);
    } else if (is(r, "parse-null-nanos")) {
        name = "parse-null-nanos";
        ok = sluice_time_parse(day, "2017-05-16", 10, NULL, &error);
    } else if (is(r, "compile-null")) {
        name = "compile-null";
        sluice_time_format f;
        ok = sluice_time_format_compile(NULL, &f, &error);
    } else if (is(r, "patterns-null")) {
        name = "patterns-null";
        sluice_patterns p;
        ok = sluice_patterns_compile(NULL, 2, &p, &error);
    } else if (is(r, "patterns-item-null")) {
        name = "patterns-item-null";
        const char *two[] = {"^%{INT:pid}", NULL};
        sluice_patterns p;
        ok = sluice_patterns_compile(two, 2, &p, &error);
    } else if (is(r, "json-get-null-path")) {
        name = "json-get-null-path";
        ok = sluice_json_get(r->payload, NULL, &value, &found, &error);
    } else if (is(r, "schema-null-text")) {
        name = "schema-null-text";
        ok = sluice_schema(7, &value, NULL, &error);
    } else if (is(r, "schema-references-null-each")) {
        name = "schema-references-null-each";
        ok = sluice_schema_references(7, NULL, NULL, NULL, &error);
    } else if (is(r, "schema-unfetched")) {
        /* No [schema_registry] in `sluice plugin run`: the host's reason. */
        name = "schema-unfetched";
        sluice_buf text = {0};
        ok = sluice_schema(7, &value, &text, &error);
        sluice_buf_free(&text);
    } else if (is(r, "reject-null")) {
        sluice_reject(out, NULL);
        return;
    } else if (is(r, "emit-null")) {
        sluice_emit(out, NULL);
        return;
    } else if (is(r, "ok-parse-not-utf8")) {
        /* A payload handed over as text: not UTF-8, so not a time, but no trap. */
        name = "ok-parse-not-utf8";
        ok = !sluice_time_parse(day, "\xff\xfe" "2017-05-16", 12, &nanos, &error);
        result = (long long)error.len;
    } else if (is(r, "ok-compile-not-utf8")) {
        name = "ok-compile-not-utf8";
        /* Compiled, with U+FFFD as a literal to match: no trap. */
        sluice_time_format f;
        result = sluice_time_format_compile("\xff%Y", &f, &error);
        sluice_time_format_free(f);
    } else if (is(r, "ok-match-not-utf8")) {
        name = "ok-match-not-utf8";
        result = sluice_patterns_match(pid, "12\xff", 3, NULL, NULL);
    } else if (is(r, "ok-match-never-compiled")) {
        name = "ok-match-never-compiled";
        sluice_patterns none = {0};
        result = sluice_patterns_match(none, "12", 2, NULL, NULL);
    } else if (is(r, "ok-logfmt-null-callback")) {
        name = "ok-logfmt-null-callback";
        result = (long long)sluice_logfmt((sluice_bytes){(const uint8_t *)"a=1 b", 5}, NULL, NULL);
    } else if (is(r, "ok-logfmt-null-line")) {
        name = "ok-logfmt-null-line";
        result = (long long)sluice_logfmt((sluice_bytes){NULL, 5}, NULL, NULL);
    } else if (is(r, "ok-log-not-utf8")) {
        name = "ok-log-not-utf8";
        sluice_log(SLUICE_INFO, "a payload: %s", "\xff\xfe");
    } else if (is(r, "ok-framed-null-body")) {
        name = "ok-framed-null-body";
        uint32_t id = 0;
        result = sluice_framed((sluice_bytes){(const uint8_t *)"\0\0\0\0\7x", 6}, &id, NULL);
    } else if (is(r, "ok-framed-payload")) {
        name = "ok-framed-payload";
        uint32_t id = 0;
        sluice_bytes body;
        result = sluice_framed(r->payload, &id, &body);
    } else if (is(r, "ok-framed-bytes")) {
        name = "ok-framed-bytes";
        uint32_t id = 0;
        sluice_bytes body = {0};
        result = sluice_framed((sluice_bytes){(const uint8_t *)"\0\0\0\1\7x", 6}, &id, &body) ? (long long)id * 10 + (long long)body.len : -1;
    } else if (is(r, "ok-rfc3339-extreme")) {
        name = "ok-rfc3339-extreme";
        sluice_format_rfc3339(INT64_MIN, &value);
        sluice_format_rfc3339(INT64_MAX, NULL);
        result = (long long)value.len;
    } else {
        sluice_reject(out, "no such mistake in this demo");
        return;
    }
    if (ok)
        done(out, name, result);
    else
        sluice_reject(out, "%s: %.*s", name, (int)error.len, error.ptr ? error.ptr : "");
    sluice_buf_free(&error);
    sluice_buf_free(&value);
}

SLUICE_PLUGIN(setup, process)
