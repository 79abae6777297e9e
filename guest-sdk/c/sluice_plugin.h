/* Write a sluice plugin in C: one function, one export line.
 *
 *     #include "sluice_plugin.h"
 *
 *     static void process(const sluice_record *r, sluice_out *out) {
 *         if (r->payload.len == 0) { sluice_drop(out, "empty line"); return; }
 *         sluice_buf body = {0};
 *         sluice_json_open(&body);
 *         sluice_json_key(&body, "line");
 *         sluice_json_string(&body, (const char *)r->payload.ptr, r->payload.len);
 *         sluice_json_close(&body);
 *         sluice_emit(out, &(sluice_event){ .body = body.ptr, .body_len = body.len });
 *         sluice_buf_free(&body);
 *     }
 *
 *     SLUICE_PLUGIN(NULL, process)
 *
 * `build.sh plugin.c plugin.wasm` builds it with clang and wasi-libc into a
 * component of `sluice:plugin@0.2.0`. The SDK unpacks each batch into one
 * `sluice_record` at a time (views into the batch: no copy) and packs what
 * `process` says into the outcome buffers; the byte layout of both is in
 * `wit/plugin.wit`, and a plugin never sees it.
 *
 * No WASI: the component imports only the host's log and clock, and C's
 * stdio, files and sockets are not there (the host grants none anyway).
 * Memory comes from wasi-libc's malloc. */
#ifndef SLUICE_PLUGIN_H
#define SLUICE_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* sluice_bytes, and reading the config: sluice_config_next_key,
 * sluice_config_string (and sluice_json_member for any value). */
#include "sluice_json_read.h"

/* One record in. */
typedef struct {
    /* The record's bytes, unmodified; not necessarily UTF-8. */
    sluice_bytes payload;
    /* The Kafka message key, when `has_key` (an empty key is not none). */
    bool has_key;
    sluice_bytes key;
    /* Kafka headers; read them with `sluice_header`. */
    size_t header_count;
    /* When the source says the record was produced, ns since the epoch. */
    bool has_source_timestamp;
    int64_t source_timestamp;
    /* The event id and time an earlier plugin of the chain set. */
    bool has_event_id;
    sluice_bytes event_id;
    bool has_timestamp;
    int64_t timestamp;
    /* The position: a kind of source ("kafka", "file"), a partition of it
     * ("logs/3", "/var/log/app.log#0") and an offset in the partition. */
    sluice_bytes source;
    sluice_bytes partition;
    int64_t offset;
    /* Private to the SDK. */
    const uint8_t *headers_;
    const uint8_t *data_;
    size_t data_len_;
} sluice_record;

/* Header `i` (0 ≤ i < header_count) of `r`; false if out of range. */
bool sluice_header(const sluice_record *r, size_t i, sluice_bytes *name, sluice_bytes *value);

/* Where the outcome of one record goes. */
typedef struct sluice_out sluice_out;

/* One event out. `body` is one JSON object in UTF-8 (the host rejects the
 * record otherwise). `id` NULL for none (the host derives one from the
 * position, or keeps the one an earlier stage set); never empty. The SDK
 * copies all of it. `keep`: the body is the record's payload, unchanged;
 * `body` is then ignored and nothing of it crosses back to the host (the
 * contract's keep flag: the fastest way to pass a record on). */
typedef struct {
    const char *body;
    size_t body_len;
    const char *id;
    size_t id_len;
    bool has_timestamp;
    int64_t timestamp;
    bool keep;
    /* The sinks the event goes to, and only those, over the config's
     * routes: their `[[sinks]]` names joined by ',' ("index,archive"),
     * NUL-terminated. NULL: the routes decide. A name the pipeline has no
     * sink for sends the record to the quarantine, naming it. */
    const char *sinks;
} sluice_event;

/* The record becomes this event; call again for a split into several.
 * A record for which `process` calls nothing becomes no events (the same
 * as a drop with the reason "no events"). */
void sluice_emit(sluice_out *out, const sluice_event *event);
/* The record goes on unchanged, with the id and timestamp an earlier stage
 * set: sluice_emit of `{ .keep = true }`. Filters, validators and id or
 * timestamp setters (with `.id` or `.timestamp` set) should use keep. */
void sluice_keep(sluice_out *out);
/* Filtered out on purpose; a short, stable reason (it labels a metric). */
void sluice_drop(sluice_out *out, const char *reason);
/* Never valid as it is: to the quarantine with this reason (printf-style);
 * name the field and value at fault. A drop or reject cancels any events
 * already emitted for the record. */
void sluice_reject(sluice_out *out, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* The host's clock, ns since the epoch, and its log. */
int64_t sluice_now(void);
typedef enum { SLUICE_TRACE, SLUICE_DEBUG, SLUICE_INFO, SLUICE_WARN, SLUICE_ERROR } sluice_level;
void sluice_log(sluice_level level, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* A growable byte buffer. Zero-initialise it; free it with sluice_buf_free
 * (or keep it and sluice_buf_clear it to reuse its memory). */
typedef struct {
    char *ptr;
    size_t len;
    size_t cap;
} sluice_buf;
void sluice_buf_push(sluice_buf *b, const void *bytes, size_t len);
void sluice_buf_clear(sluice_buf *b);
void sluice_buf_free(sluice_buf *b);

/* Writing one JSON object: open, then key and value in turns, then close.
 * Strings are escaped; invalid UTF-8 becomes U+FFFD. */
void sluice_json_open(sluice_buf *b);
void sluice_json_key(sluice_buf *b, const char *key);
void sluice_json_key_n(sluice_buf *b, const char *key, size_t len);
void sluice_json_string(sluice_buf *b, const char *s, size_t len);
void sluice_json_int(sluice_buf *b, int64_t v);
void sluice_json_raw(sluice_buf *b, const char *json); /* true, false, null, a number */
void sluice_json_close(sluice_buf *b);

/* Native helpers (`sluice:plugin/helpers` in wit/plugin.wit, where their
 * limits are documented): work a parser repeats per record, run by the
 * host over the code sluice's own plugins use, so a format, a zone or a
 * pattern means the same in every language. A plugin that calls none does
 * not import them. Where a call can fail it returns false and, when
 * `error` is not NULL, appends the host's message to it; a NULL pointer,
 * or a format or set never compiled or already freed, fails the same way
 * naming the mistake (never a trap). Text need not be UTF-8: invalid bytes
 * are read as U+FFFD. */

/* A timestamp format compiled once (in setup): `spec` is a name or
 * pattern ("rfc3339", "%Y-%m-%d %H:%M:%S") or a JSON table with its rule,
 * {"format": "%Y-%m-%d %H:%M:%S", "zone": "Europe/Berlin"} (the main
 * docs/src/plugins.md, "Timestamps"). Keep it for the plugin's life. */
typedef struct {
    int32_t handle_;
} sluice_time_format;
bool sluice_time_format_compile(const char *spec, sluice_time_format *format, sluice_buf *error);
/* `text` as ns since the epoch; the error names the input, the format and
 * why (a good reject reason as it is). */
bool sluice_time_parse(sluice_time_format format, const char *text, size_t len, int64_t *nanos, sluice_buf *error);
/* Let the host drop a format (at most 64 live per instance). */
void sluice_time_format_free(sluice_time_format format);
/* RFC 3339 in UTC, as sinks write it, appended to `out`. */
void sluice_format_rfc3339(int64_t nanos, sluice_buf *out);

/* A pair of a logfmt line, or a named capture: `value` NULL for a bare
 * key. Both are valid during the call only. */
typedef void (*sluice_pair_fn)(void *ctx, sluice_bytes name, const sluice_bytes *value);
/* The `key=value` pairs of a logfmt line, in order, each handed to `each`;
 * returns how many. */
size_t sluice_logfmt(sluice_bytes line, sluice_pair_fn each, void *ctx);

/* The schemas the one under `id` references (Confluent's schema references:
 * an Avro named type, a Protobuf import, a JSON Schema `$ref` kept under
 * another subject), each handed to `each(ctx, name, &text)` (valid during
 * the call only): every one the references reach, each before any that
 * needs it, the order to parse them in; `*count` (unless NULL) says how
 * many. False with the host's reason in `error`, as sluice_schema, or
 * naming the mistake when `each` is NULL. */
bool sluice_schema_references(uint32_t id, sluice_pair_fn each, void *ctx, size_t *count, sluice_buf *error);

/* True when `payload` is one JSON object in UTF-8 (the rule every body
 * meets); else false, with why in `error`. */
bool sluice_json_object_check(sluice_bytes payload, sluice_buf *error);
/* The JSON text of the value at dotted `path` ("user.id", "tags.0") of the
 * object `payload`, appended to `value`; `*found` false where it holds
 * nothing. False (and why) when `payload` is not one JSON object. */
bool sluice_json_get(sluice_bytes payload, const char *path, sluice_buf *value, bool *found, sluice_buf *error);

/* Records framed for a schema registry (Confluent's wire format: a zero
 * byte, the schema id in 4 bytes big-endian, then the encoded record).
 * True, with the id and the bytes after the header (a view into
 * `payload`), when `payload` is framed; false when it is not (it does not
 * start with a zero byte, or is shorter than the header), or when `id` or
 * `body` is NULL. Reject a record that is not framed with
 * SLUICE_NOT_FRAMED. */
bool sluice_framed(sluice_bytes payload, uint32_t *id, sluice_bytes *body);
#define SLUICE_NOT_FRAMED                                                      \
    "not in the schema registry's wire format: a record starts with a zero byte and a 4-byte schema id"
/* The schema the registry holds under `id`: its type (AVRO, PROTOBUF or
 * JSON) appended to `schema_type` and its text to `text`. No I/O: the host
 * fetched every id of the batch before the plugin was called. False, with
 * the host's reason in `error` (a good reject reason as it is), when the
 * registry has no such schema, the host never fetched `id`, or the
 * pipeline has no [schema_registry]; or naming the mistake when
 * `schema_type` or `text` is NULL. Ask once per new id and keep what you
 * parse: an id never changes what it means. */
bool sluice_schema(uint32_t id, sluice_buf *schema_type, sluice_buf *text, sluice_buf *error);

/* `%{SHORTCUT:name}` patterns (the pattern plugin's engine and shortcut
 * table), compiled once, tried in order. */
typedef struct {
    int32_t handle_;
} sluice_patterns;
bool sluice_patterns_compile(const char *const *patterns, size_t count, sluice_patterns *set, sluice_buf *error);
/* Let the host drop a set (at most 16 live per instance). */
void sluice_patterns_free(sluice_patterns set);
/* The index of the first pattern that matches `line`, its named captures
 * handed to `each` (value never NULL; `each` may be NULL); -1 when none
 * matches, or when `set` was never compiled or was freed. */
int sluice_patterns_match(sluice_patterns set, const char *line, size_t len, sluice_pair_fn each, void *ctx);

/* The plugin. `setup` (may be NULL) gets the config as JSON text and
 * returns NULL to accept it, or a message naming the key at fault to
 * refuse it (the host then refuses to start). `process` is called once per
 * record of each batch, in order. */
typedef const char *(*sluice_setup_fn)(const char *config);
typedef void (*sluice_process_fn)(const sluice_record *record, sluice_out *out);

#define SLUICE_PLUGIN(setup_fn, process_fn)                                   \
    sluice_setup_fn sluice_plugin_setup_ = (setup_fn);                        \
    sluice_process_fn sluice_plugin_process_ = (process_fn);

#endif
