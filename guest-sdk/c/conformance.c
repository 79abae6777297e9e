/* The conformance plugin (conformance/SPEC.md) in C. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice_plugin.h"

static char *tag;

static const char *setup(const char *config) {
    static char refusal[256];
    char *refuse = NULL;
    if (sluice_config_string(config, "refuse", &refuse) == 1) {
        snprintf(refusal, sizeof refusal, "%s", refuse);
        free(refuse);
        return refusal;
    }
    if (sluice_config_string(config, "tag", &tag) != 1) tag = NULL;
    return NULL;
}

static bool starts_with(sluice_bytes b, const char *prefix) {
    size_t n = strlen(prefix);
    return b.len >= n && memcmp(b.ptr, prefix, n) == 0;
}

static uint32_t sum(sluice_bytes b) {
    uint32_t s = 0;
    for (size_t i = 0; i < b.len; i++) s += b.ptr[i];
    return s;
}

static void hex(sluice_buf *out, const uint8_t *p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        char two[2] = {digits[p[i] >> 4], digits[p[i] & 15]};
        sluice_buf_push(out, two, 2);
    }
}

/* Bytes shown (SPEC.md): hex up to 32 bytes, else length and sum. */
static void shown(sluice_buf *json, sluice_bytes b) {
    sluice_buf text = {0};
    if (b.len <= 32) {
        hex(&text, b.ptr, b.len);
    } else {
        char s[64];
        int n = snprintf(s, sizeof s, "%zu bytes, sum %u", b.len, (unsigned)sum(b));
        sluice_buf_push(&text, s, (size_t)n);
    }
    sluice_json_string(json, text.ptr ? text.ptr : "", text.len);
    sluice_buf_free(&text);
}

static void process(const sluice_record *r, sluice_out *out) {
    sluice_bytes p = r->payload;
    if (starts_with(p, "{\"keep\"")) {
        sluice_keep(out);
        return;
    }
    if (starts_with(p, "drop:")) {
        char *why = strndup((const char *)p.ptr + 5, p.len - 5);
        sluice_drop(out, why);
        free(why);
        return;
    }
    if (starts_with(p, "reject:")) {
        sluice_reject(out, "%.*s", (int)(p.len - 7), p.ptr + 7);
        return;
    }
    if (starts_with(p, "route:")) {
        char *names = strndup((const char *)p.ptr + 6, p.len - 6);
        sluice_buf body = {0};
        sluice_json_open(&body);
        sluice_json_key(&body, "route");
        sluice_json_string(&body, names, strlen(names));
        sluice_json_close(&body);
        sluice_emit(out, &(sluice_event){.body = body.ptr, .body_len = body.len, .sinks = names});
        sluice_buf_free(&body);
        free(names);
        return;
    }
    if (starts_with(p, "split:")) {
        char *digits = strndup((const char *)p.ptr + 6, p.len - 6);
        long n = strtol(digits, NULL, 10);
        free(digits);
        for (long k = 0; k < n; k++) {
            char body[32], id[256];
            int bl = snprintf(body, sizeof body, "{\"k\":%ld}", k);
            int il = r->has_event_id ? snprintf(id, sizeof id, "%.*s/%ld", (int)r->event_id.len, r->event_id.ptr, k)
                                     : snprintf(id, sizeof id, "none/%ld", k);
            sluice_emit(out, &(sluice_event){.body = body, .body_len = (size_t)bl, .id = id, .id_len = (size_t)il});
        }
        return;
    }
    sluice_buf b = {0};
    sluice_json_open(&b);
    sluice_json_key(&b, "tag");
    sluice_json_string(&b, tag ? tag : "", tag ? strlen(tag) : 0);
    sluice_json_key(&b, "len");
    sluice_json_int(&b, (int64_t)p.len);
    sluice_json_key(&b, "sum");
    sluice_json_int(&b, sum(p));
    sluice_json_key(&b, "head");
    sluice_buf head = {0};
    hex(&head, p.ptr, p.len < 8 ? p.len : 8);
    sluice_json_string(&b, head.ptr ? head.ptr : "", head.len);
    sluice_buf_free(&head);
    sluice_json_key(&b, "key");
    if (r->has_key) shown(&b, r->key);
    else sluice_json_raw(&b, "null");
    sluice_json_key(&b, "headers");
    sluice_buf_push(&b, "[", 1);
    for (size_t h = 0; h < r->header_count; h++) {
        sluice_bytes name, value;
        if (!sluice_header(r, h, &name, &value)) break;
        if (h) sluice_buf_push(&b, ",", 1);
        sluice_buf_push(&b, "[", 1);
        sluice_json_string(&b, (const char *)name.ptr, name.len);
        sluice_buf_push(&b, ",", 1);
        shown(&b, value);
        sluice_buf_push(&b, "]", 1);
    }
    sluice_buf_push(&b, "]", 1);
    sluice_json_key(&b, "position");
    char where[512];
    int wl = snprintf(where, sizeof where, "%.*s:%.*s@%lld", (int)r->source.len, r->source.ptr, (int)r->partition.len,
                      r->partition.ptr, (long long)r->offset);
    sluice_json_string(&b, where, (size_t)wl);
    sluice_json_close(&b);
    sluice_event e = {.body = b.ptr, .body_len = b.len};
    if (r->has_event_id) {
        e.id = (const char *)r->event_id.ptr;
        e.id_len = r->event_id.len;
    }
    if (r->has_timestamp || r->has_source_timestamp) {
        e.has_timestamp = true;
        e.timestamp = r->has_timestamp ? r->timestamp : r->source_timestamp;
    }
    sluice_emit(out, &e);
    sluice_buf_free(&b);
}

SLUICE_PLUGIN(setup, process)
