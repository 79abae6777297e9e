/* The C SDK: the exports of `sluice:plugin@0.2.0` over the bindings that
 * wit-bindgen generates (plugin.h, plugin.c), the batch unpacked into one
 * sluice_record at a time, the outcomes packed back (layout: wit/plugin.wit),
 * and small JSON helpers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "sluice_plugin.h"

extern sluice_setup_fn sluice_plugin_setup_;
extern sluice_process_fn sluice_plugin_process_;

enum { RECORD_BYTES = 64, HEADER_BYTES = 16, OUTCOME_BYTES = 12, EVENT_BYTES = 32 };
enum { KEY = 1, SOURCE_TS = 2, EVENT_ID = 4, TS = 8 };
enum { EMIT = 0, DROP = 1, REJECT = 2, NOTHING = -1 };
enum { EV_ID = 1, EV_TS = 2, EV_KEEP = 4, EV_SINKS = 8 };

/* wasm32 is little-endian, as the layout is; memcpy for unaligned loads. */
static uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static int64_t rd64(const uint8_t *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Text made UTF-8 for the host's `string` arguments (the helpers, below). */
static plugin_string_t text_of(const char *s, size_t len, sluice_buf *tmp);

/* ---- buffers ---- */

void sluice_buf_push(sluice_buf *b, const void *bytes, size_t len) {
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + len) cap *= 2;
        char *p = realloc(b->ptr, cap);
        if (!p) __builtin_trap(); /* out of memory: the host sees a fault */
        b->ptr = p;
        b->cap = cap;
    }
    if (len) memcpy(b->ptr + b->len, bytes, len);
    b->len += len;
}

void sluice_buf_clear(sluice_buf *b) { b->len = 0; }

void sluice_buf_free(sluice_buf *b) {
    free(b->ptr);
    b->ptr = NULL;
    b->len = b->cap = 0;
}

static void push32(sluice_buf *b, uint32_t v) { sluice_buf_push(b, &v, 4); }
static void push64(sluice_buf *b, int64_t v) { sluice_buf_push(b, &v, 8); }

/* ---- the outcome of each record ---- */

struct sluice_out {
    sluice_buf outcomes, events, data;
    uint32_t event_count;
    int kind;
    uint32_t first_event, reason_off, reason_len;
    size_t events_mark, data_mark;
};

static void begin_record(sluice_out *o) {
    o->kind = NOTHING;
    o->first_event = o->event_count;
    o->events_mark = o->events.len;
    o->data_mark = o->data.len;
}

static void end_record(sluice_out *o) {
    if (o->kind == DROP || o->kind == REJECT) {
        push32(&o->outcomes, (uint32_t)o->kind);
        push32(&o->outcomes, o->reason_off);
        push32(&o->outcomes, o->reason_len);
    } else {
        push32(&o->outcomes, EMIT);
        push32(&o->outcomes, o->first_event);
        push32(&o->outcomes, o->event_count - o->first_event);
    }
}

void sluice_emit(sluice_out *o, const sluice_event *e) {
    if (o->kind == DROP || o->kind == REJECT) return;
    if (!e || (!e->keep && !e->body && e->body_len) || (!e->id && e->id_len)) {
        sluice_reject(o, "sluice_emit: %s is NULL", !e ? "the event" : !e->id && e->id_len ? "the id" : "the body");
        return;
    }
    o->kind = EMIT;
    uint32_t flags = 0, io = 0, il = 0;
    if (e->id) {
        flags |= EV_ID;
        io = (uint32_t)o->data.len;
        il = (uint32_t)e->id_len;
        sluice_buf_push(&o->data, e->id, e->id_len);
    }
    uint32_t bo = 0, bl = 0;
    if (e->keep) {
        flags |= EV_KEEP;
    } else {
        bo = (uint32_t)o->data.len;
        bl = (uint32_t)e->body_len;
        sluice_buf_push(&o->data, e->body, e->body_len);
    }
    if (e->has_timestamp) flags |= EV_TS;
    uint32_t ro = 0;
    if (e->sinks) {
        /* A route: a length, then the names (flag bit 3). */
        flags |= EV_SINKS;
        ro = (uint32_t)o->data.len;
        uint32_t n = (uint32_t)strlen(e->sinks);
        uint8_t len[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
        sluice_buf_push(&o->data, len, 4);
        sluice_buf_push(&o->data, e->sinks, n);
    }
    push32(&o->events, io);
    push32(&o->events, il);
    push32(&o->events, bo);
    push32(&o->events, bl);
    push64(&o->events, e->has_timestamp ? e->timestamp : 0);
    push32(&o->events, flags);
    push32(&o->events, ro);
    o->event_count++;
}

void sluice_keep(sluice_out *o) {
    sluice_event e = {0};
    e.keep = true;
    sluice_emit(o, &e);
}

static void reason(sluice_out *o, int kind, const char *text, size_t len) {
    if (o->kind == DROP || o->kind == REJECT) return; /* the first one stands */
    /* Cancel the record's events: it is dropped or rejected whole. */
    o->events.len = o->events_mark;
    o->data.len = o->data_mark;
    o->event_count = o->first_event;
    o->kind = kind;
    o->reason_off = (uint32_t)o->data.len;
    o->reason_len = (uint32_t)len;
    sluice_buf_push(&o->data, text, len);
}

void sluice_drop(sluice_out *o, const char *why) {
    if (!why) why = "(sluice_drop of a NULL reason)";
    reason(o, DROP, why, strlen(why));
}

static char *vformat(const char *format, va_list ap, size_t *len) {
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, format, copy);
    va_end(copy);
    if (n < 0) n = 0;
    char *s = malloc((size_t)n + 1);
    if (!s) __builtin_trap();
    vsnprintf(s, (size_t)n + 1, format, ap);
    *len = (size_t)n;
    return s;
}

void sluice_reject(sluice_out *o, const char *format, ...) {
    if (!format) {
        const char *none = "(sluice_reject of a NULL reason)";
        reason(o, REJECT, none, strlen(none));
        return;
    }
    va_list ap;
    va_start(ap, format);
    size_t len;
    char *s = vformat(format, ap, &len);
    va_end(ap);
    reason(o, REJECT, s, len);
    free(s);
}

/* ---- the host's clock and log ---- */

int64_t sluice_now(void) { return sluice_plugin_clock_now(); }

void sluice_log(sluice_level level, const char *format, ...) {
    if (!format) return;
    if ((unsigned)level > SLUICE_ERROR) level = SLUICE_ERROR;
    va_list ap;
    va_start(ap, format);
    size_t len;
    char *s = vformat(format, ap, &len);
    va_end(ap);
    /* A line quoting a payload may not be UTF-8; the host's `string` must. */
    sluice_buf tmp = {0};
    plugin_string_t msg = text_of(s, len, &tmp);
    sluice_plugin_log_log((sluice_plugin_log_level_t)level, &msg);
    sluice_buf_free(&tmp);
    free(s);
}

/* ---- records ---- */

static bool slice(const uint8_t *desc, const uint8_t *data, size_t data_len, sluice_bytes *out) {
    uint32_t off = rd32(desc), len = rd32(desc + 4);
    if ((uint64_t)off + len > data_len) return false;
    out->ptr = data + off;
    out->len = len;
    return true;
}

bool sluice_header(const sluice_record *r, size_t i, sluice_bytes *name, sluice_bytes *value) {
    if (i >= r->header_count) return false;
    const uint8_t *d = r->headers_ + i * HEADER_BYTES;
    return slice(d, r->data_, r->data_len_, name) && slice(d + 8, r->data_, r->data_len_, value);
}

/* Fill `r` from descriptor `i`; NULL, or what is wrong with it. */
static const char *read_record(const plugin_batch_t *b, size_t i, sluice_record *r) {
    const uint8_t *d = b->records.ptr + i * RECORD_BYTES;
    const uint8_t *data = b->data.ptr;
    size_t n = b->data.len;
    uint32_t flags = rd32(d + 60);
    memset(r, 0, sizeof *r);
    if (!slice(d, data, n, &r->payload)) return "payload outside the data buffer";
    r->has_key = flags & KEY;
    if (r->has_key && !slice(d + 8, data, n, &r->key)) return "key outside the data buffer";
    uint32_t first = rd32(d + 16), count = rd32(d + 20);
    if (((uint64_t)first + count) * HEADER_BYTES > b->headers.len) return "headers outside the header table";
    r->header_count = count;
    r->headers_ = b->headers.ptr + (size_t)first * HEADER_BYTES;
    r->has_event_id = flags & EVENT_ID;
    if (r->has_event_id && !slice(d + 24, data, n, &r->event_id)) return "event id outside the data buffer";
    r->has_source_timestamp = flags & SOURCE_TS;
    r->source_timestamp = rd64(d + 32);
    r->has_timestamp = flags & TS;
    r->timestamp = rd64(d + 40);
    r->offset = rd64(d + 48);
    uint32_t p = rd32(d + 56);
    if (p >= b->partitions.len) return "partition outside the partition table";
    r->source = (sluice_bytes){b->partitions.ptr[p].source.ptr, b->partitions.ptr[p].source.len};
    r->partition = (sluice_bytes){b->partitions.ptr[p].name.ptr, b->partitions.ptr[p].name.len};
    r->data_ = data;
    r->data_len_ = n;
    return NULL;
}

/* ---- the exports ---- */

static bool ready = false;

bool exports_plugin_init(plugin_string_t *config, plugin_string_t *err) {
    const char *refusal = sluice_setup_config_(config->ptr, config->len, sluice_plugin_setup_);
    plugin_string_free(config);
    if (refusal) {
        plugin_string_dup(err, refusal);
        return false;
    }
    ready = true;
    return true;
}

/* The host's clock, read once per batch and only when a time is parsed
 * (a yearless format needs it): `sluice_time_parse` of every record would
 * otherwise make a host call each. */
static bool batch_now_read;
static int64_t batch_now;

void exports_plugin_process(plugin_batch_t *batch, plugin_outcomes_t *ret) {
    batch_now_read = false;
    size_t n = batch->records.len / RECORD_BYTES;
    sluice_out o = {0};
    for (size_t i = 0; i < n; i++) {
        begin_record(&o);
        sluice_record r;
        const char *bad = read_record(batch, i, &r);
        if (bad)
            sluice_reject(&o, "the SDK cannot read the batch: record %zu: %s", i, bad);
        else if (!ready)
            sluice_reject(&o, "plugin used before init");
        else
            sluice_plugin_process_(&r, &o);
        end_record(&o);
    }
    plugin_batch_free(batch);
    /* The canonical ABI frees these after the call (post-return). */
    ret->outcomes = (plugin_list_u8_t){(uint8_t *)o.outcomes.ptr, o.outcomes.len};
    ret->events = (plugin_list_u8_t){(uint8_t *)o.events.ptr, o.events.len};
    ret->data = (plugin_list_u8_t){(uint8_t *)o.data.ptr, o.data.len};
}

/* ---- writing JSON ---- */

/* A comma before a value or key, unless it opens a container, follows a
 * key, or the caller wrote the comma. */
static void json_sep(sluice_buf *b) {
    if (!b->len) return;
    char last = b->ptr[b->len - 1];
    if (last != '{' && last != '[' && last != ':' && last != ',') sluice_buf_push(b, ",", 1);
}

void sluice_json_open(sluice_buf *b) { sluice_buf_push(b, "{", 1); }
void sluice_json_close(sluice_buf *b) { sluice_buf_push(b, "}", 1); }

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if invalid. */
static size_t utf8_len(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    size_t len;
    uint32_t min;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) len = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) len = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, min = 0x10000;
    else return 0;
    if (len > n) return 0;
    uint32_t cp = c & (0x7f >> len);
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

void sluice_json_string(sluice_buf *b, const char *str, size_t n) {
    const uint8_t *s = (const uint8_t *)str;
    json_sep(b);
    sluice_buf_push(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            sluice_buf_push(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            char esc[7];
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sluice_buf_push(b, esc, 6);
            i++;
        } else {
            size_t len = utf8_len(s + i, n - i);
            if (len) {
                sluice_buf_push(b, s + i, len);
                i += len;
            } else {
                sluice_buf_push(b, "\xef\xbf\xbd", 3); /* U+FFFD */
                i++;
            }
        }
    }
    sluice_buf_push(b, "\"", 1);
}

void sluice_json_key_n(sluice_buf *b, const char *key, size_t len) {
    sluice_json_string(b, key, len);
    sluice_buf_push(b, ":", 1);
}

void sluice_json_key(sluice_buf *b, const char *key) { sluice_json_key_n(b, key, strlen(key)); }

void sluice_json_int(sluice_buf *b, int64_t v) {
    char s[24];
    int n = snprintf(s, sizeof s, "%lld", (long long)v);
    json_sep(b);
    sluice_buf_push(b, s, (size_t)n);
}

void sluice_json_raw(sluice_buf *b, const char *json) {
    json_sep(b);
    sluice_buf_push(b, json, strlen(json));
}

/* ---- Native helpers: thin wrappers over wit-bindgen's imports, owning
 * nothing past the call (each result the host lowers is freed here).
 *
 * Each checks what a C author is likely to get wrong before the host
 * sees it, because the host cannot be told kindly: a `string` argument
 * that is not UTF-8 (a record's payload passed as text), a handle never
 * compiled or already freed, trap the instance; a NULL pointer reads or
 * writes address 0, which wasm allows, corrupting memory silently. So a
 * text is made UTF-8 (U+FFFD for each invalid byte), handles are checked
 * against the live ones, and a NULL returns false with the mistake named
 * in `error`, which the plugin rejects its record with. */

static plugin_string_t borrowed(const char *s, size_t len) { return (plugin_string_t){(uint8_t *)s, len}; }

static void take_error(plugin_string_t *err, sluice_buf *error) {
    if (error) sluice_buf_push(error, err->ptr, err->len);
    plugin_string_free(err);
}

static bool mistake(sluice_buf *error, const char *what) {
    if (error) sluice_buf_push(error, what, strlen(what));
    return false;
}

/* The length of the valid UTF-8 sequence at `s` (of `n` bytes), 0 if none. */
static size_t utf8_char(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || len > n || (len == 2 && c < 0xc2) || (len == 4 && c > 0xf4)) return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xc0) != 0x80) return 0;
    if (len == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))) return 0; /* overlong, surrogate */
    if (len == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))) return 0;
    return len;
}

/* `s` as the host may take a `string`: itself when it is UTF-8, else a
 * copy in `tmp` with U+FFFD for each invalid byte. */
static plugin_string_t text_of(const char *s, size_t len, sluice_buf *tmp) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0, k;
    while (i < len && (k = utf8_char(u + i, len - i))) i += k;
    if (i == len) return borrowed(s, len);
    sluice_buf_clear(tmp);
    sluice_buf_push(tmp, s, i);
    while (i < len) {
        if ((k = utf8_char(u + i, len - i))) {
            sluice_buf_push(tmp, u + i, k);
            i += k;
        } else {
            sluice_buf_push(tmp, "\xef\xbf\xbd", 3);
            i++;
        }
    }
    return borrowed(tmp->ptr, tmp->len);
}

/* The handles this instance holds, so that one never compiled (zero) or
 * already freed is refused here rather than trapped on by the host. As
 * many as the host lets live: past that it refuses the compile itself. */
enum { MAX_FORMATS = 64, MAX_PATTERN_SETS = 16 };
static int32_t live_formats[MAX_FORMATS], live_patterns[MAX_PATTERN_SETS];

static bool is_live(const int32_t *live, size_t n, int32_t h) {
    for (size_t i = 0; h && i < n; i++)
        if (live[i] == h) return true;
    return false;
}

static void set_live(int32_t *live, size_t n, int32_t from, int32_t to) {
    for (size_t i = 0; i < n; i++)
        if (live[i] == from) {
            live[i] = to;
            return;
        }
}

bool sluice_framed(sluice_bytes payload, uint32_t *id, sluice_bytes *body) {
    if (!id || !body || !payload.ptr || payload.len < 5 || payload.ptr[0] != 0) return false;
    const uint8_t *p = payload.ptr;
    *id = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | (uint32_t)p[4];
    *body = (sluice_bytes){p + 5, payload.len - 5};
    return true;
}

bool sluice_schema(uint32_t id, sluice_buf *schema_type, sluice_buf *text, sluice_buf *error) {
    if (!schema_type || !text) return mistake(error, "sluice_schema: schema_type and text must not be NULL");
    plugin_tuple2_string_string_t got;
    plugin_string_t err;
    if (!sluice_plugin_helpers_schema(id, &got, &err)) {
        take_error(&err, error);
        return false;
    }
    sluice_buf_push(schema_type, got.f0.ptr, got.f0.len);
    sluice_buf_push(text, got.f1.ptr, got.f1.len);
    plugin_tuple2_string_string_free(&got);
    return true;
}

bool sluice_schema_references(uint32_t id, sluice_pair_fn each, void *ctx, size_t *count, sluice_buf *error) {
    if (!each) return mistake(error, "sluice_schema_references: each must not be NULL");
    plugin_list_tuple2_string_string_t got;
    plugin_string_t err;
    if (!sluice_plugin_helpers_schema_references(id, &got, &err)) {
        take_error(&err, error);
        return false;
    }
    for (size_t i = 0; i < got.len; i++) {
        sluice_bytes name = {got.ptr[i].f0.ptr, got.ptr[i].f0.len}, text = {got.ptr[i].f1.ptr, got.ptr[i].f1.len};
        each(ctx, name, &text);
    }
    if (count) *count = got.len;
    plugin_list_tuple2_string_string_free(&got);
    return true;
}

bool sluice_time_format_compile(const char *spec, sluice_time_format *format, sluice_buf *error) {
    if (!spec || !format) return mistake(error, "sluice_time_format_compile: spec and format must not be NULL");
    sluice_buf tmp = {0};
    plugin_string_t text = text_of(spec, strlen(spec), &tmp), err;
    sluice_plugin_helpers_own_time_format_t own;
    bool ok = sluice_plugin_helpers_static_time_format_compile(&text, &own, &err);
    sluice_buf_free(&tmp);
    if (!ok) {
        take_error(&err, error);
        return false;
    }
    format->handle_ = own.__handle;
    set_live(live_formats, MAX_FORMATS, 0, own.__handle);
    return true;
}

bool sluice_time_parse(sluice_time_format format, const char *text, size_t len, int64_t *nanos, sluice_buf *error) {
    if (!nanos || (!text && len)) return mistake(error, "sluice_time_parse: text and nanos must not be NULL");
    if (!is_live(live_formats, MAX_FORMATS, format.handle_))
        return mistake(error, "sluice_time_parse: the format was never compiled, or was freed");
    sluice_buf tmp = {0};
    plugin_string_t input = text_of(text, len, &tmp), err;
    sluice_plugin_helpers_borrow_time_format_t self = {format.handle_};
    if (!batch_now_read) {
        batch_now = sluice_now();
        batch_now_read = true;
    }
    bool ok = sluice_plugin_helpers_method_time_format_parse(self, &input, batch_now, nanos, &err);
    sluice_buf_free(&tmp);
    if (!ok) {
        take_error(&err, error);
        return false;
    }
    return true;
}

void sluice_time_format_free(sluice_time_format format) {
    /* Freeing twice, or a format never compiled, does nothing. */
    if (!is_live(live_formats, MAX_FORMATS, format.handle_)) return;
    set_live(live_formats, MAX_FORMATS, format.handle_, 0);
    sluice_plugin_helpers_time_format_drop_own((sluice_plugin_helpers_own_time_format_t){format.handle_});
}

void sluice_format_rfc3339(int64_t nanos, sluice_buf *out) {
    if (!out) return;
    plugin_string_t text;
    sluice_plugin_helpers_format_rfc3339(nanos, &text);
    sluice_buf_push(out, text.ptr, text.len);
    plugin_string_free(&text);
}

size_t sluice_logfmt(sluice_bytes line, sluice_pair_fn each, void *ctx) {
    if (!line.ptr) line.len = 0;
    plugin_list_u8_t bytes = {(uint8_t *)line.ptr, line.len};
    plugin_list_tuple2_string_option_string_t pairs;
    sluice_plugin_helpers_logfmt(&bytes, &pairs);
    for (size_t i = 0; i < pairs.len; i++) {
        plugin_tuple2_string_option_string_t *p = &pairs.ptr[i];
        sluice_bytes name = {p->f0.ptr, p->f0.len}, value = {p->f1.val.ptr, p->f1.val.len};
        if (each) each(ctx, name, p->f1.is_some ? &value : NULL);
    }
    size_t n = pairs.len;
    plugin_list_tuple2_string_option_string_free(&pairs);
    return n;
}

bool sluice_json_object_check(sluice_bytes payload, sluice_buf *error) {
    if (!payload.ptr) payload.len = 0;
    plugin_list_u8_t bytes = {(uint8_t *)payload.ptr, payload.len};
    plugin_string_t why;
    if (!sluice_plugin_helpers_json_object_check(&bytes, &why)) return true;
    take_error(&why, error);
    return false;
}

bool sluice_json_get(sluice_bytes payload, const char *path, sluice_buf *value, bool *found, sluice_buf *error) {
    if (!path || !value || !found) return mistake(error, "sluice_json_get: path, value and found must not be NULL");
    if (!payload.ptr) payload.len = 0;
    plugin_list_u8_t bytes = {(uint8_t *)payload.ptr, payload.len};
    sluice_buf tmp = {0};
    plugin_string_t one = text_of(path, strlen(path), &tmp), err;
    plugin_list_string_t paths = {&one, 1};
    plugin_list_option_string_t got;
    bool ok = sluice_plugin_helpers_json_get(&bytes, &paths, &got, &err);
    sluice_buf_free(&tmp);
    if (!ok) {
        take_error(&err, error);
        return false;
    }
    *found = got.len == 1 && got.ptr[0].is_some;
    if (*found) sluice_buf_push(value, got.ptr[0].val.ptr, got.ptr[0].val.len);
    plugin_list_option_string_free(&got);
    return true;
}

bool sluice_patterns_compile(const char *const *patterns, size_t count, sluice_patterns *set, sluice_buf *error) {
    if (!set || (!patterns && count)) return mistake(error, "sluice_patterns_compile: patterns and set must not be NULL");
    for (size_t i = 0; i < count; i++)
        if (!patterns[i]) return mistake(error, "sluice_patterns_compile: a pattern is NULL");
    plugin_string_t *items = calloc(count ? count : 1, sizeof *items);
    sluice_buf *tmp = calloc(count ? count : 1, sizeof *tmp);
    if (!items || !tmp) abort();
    for (size_t i = 0; i < count; i++) items[i] = text_of(patterns[i], strlen(patterns[i]), &tmp[i]);
    plugin_list_string_t list = {items, count};
    sluice_plugin_helpers_own_patterns_t own;
    plugin_string_t err;
    bool ok = sluice_plugin_helpers_static_patterns_compile(&list, &own, &err);
    free(items);
    for (size_t i = 0; i < count; i++) sluice_buf_free(&tmp[i]);
    free(tmp);
    if (!ok) {
        take_error(&err, error);
        return false;
    }
    set->handle_ = own.__handle;
    set_live(live_patterns, MAX_PATTERN_SETS, 0, own.__handle);
    return true;
}

void sluice_patterns_free(sluice_patterns set) {
    if (!is_live(live_patterns, MAX_PATTERN_SETS, set.handle_)) return;
    set_live(live_patterns, MAX_PATTERN_SETS, set.handle_, 0);
    sluice_plugin_helpers_patterns_drop_own((sluice_plugin_helpers_own_patterns_t){set.handle_});
}

int sluice_patterns_match(sluice_patterns set, const char *line, size_t len, sluice_pair_fn each, void *ctx) {
    /* A set never compiled, or freed, matches nothing (the header says
     * -1 is "none matched"; sluice_patterns_compile's false said why). */
    if (!is_live(live_patterns, MAX_PATTERN_SETS, set.handle_) || (!line && len)) return -1;
    sluice_buf tmp = {0};
    plugin_string_t text = text_of(line, len, &tmp);
    sluice_plugin_helpers_borrow_patterns_t self = {set.handle_};
    sluice_plugin_helpers_pattern_match_t m;
    bool matched = sluice_plugin_helpers_method_patterns_first_match(self, &text, &m);
    sluice_buf_free(&tmp);
    if (!matched) return -1;
    for (size_t i = 0; i < m.captures.len; i++) {
        plugin_tuple2_string_string_t *c = &m.captures.ptr[i];
        sluice_bytes name = {c->f0.ptr, c->f0.len}, value = {c->f1.ptr, c->f1.len};
        if (each) each(ctx, name, &value);
    }
    int index = (int)m.pattern;
    sluice_plugin_helpers_pattern_match_free(&m);
    return index;
}
