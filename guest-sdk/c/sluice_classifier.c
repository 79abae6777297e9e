/* The C SDK of classifier plugins: the exports of the classifier world
 * over the bindings wit-bindgen generates (classifier.h, classifier.c);
 * the request's packed records read in place (layout:
 * wit/classifier.wit), the reply built and lowered. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classifier.h"
#include "sluice_classifier.h"

extern sluice_classifier_setup_fn sluice_classifier_setup_;
extern sluice_classify_fn sluice_classifier_classify_;

enum { RECORD_BYTES = 32 };

static uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

sluice_bytes sluice_request_id(const sluice_request *r, size_t i) {
    if (i >= r->count) return (sluice_bytes){0};
    const uint8_t *d = r->records_ + i * RECORD_BYTES;
    uint32_t start = rd32(d), len = rd32(d + 4);
    if ((size_t)start + len > r->ids_len_) return (sluice_bytes){0};
    return (sluice_bytes){r->ids_ + start, len};
}

bool sluice_request_timestamp(const sluice_request *r, size_t i, int64_t *nanos) {
    if (i >= r->count) return false;
    const uint8_t *d = r->records_ + i * RECORD_BYTES;
    if (!(rd32(d + 24) & 1)) return false;
    memcpy(nanos, d + 16, 8);
    return true;
}

void sluice_request_span(const sluice_request *r, size_t i, uint32_t *start, uint32_t *len) {
    *start = *len = 0;
    if (i >= r->count) return;
    const uint8_t *d = r->records_ + i * RECORD_BYTES;
    *start = rd32(d + 8);
    *len = rd32(d + 12);
}

bool sluice_response_header(const sluice_response *r, const char *name, sluice_bytes *value) {
    const classifier_tuple2_string_string_t *h = r->headers_;
    size_t n = strlen(name);
    for (size_t i = 0; i < r->header_count_; i++) {
        if (h[i].f0.len == n && memcmp(h[i].f0.ptr, name, n) == 0) {
            *value = (sluice_bytes){h[i].f1.ptr, h[i].f1.len};
            return true;
        }
    }
    return false;
}

static char excerpt[480];

const char *sluice_response_excerpt(const sluice_response *r) {
    size_t n = (size_t)snprintf(excerpt, sizeof excerpt, "HTTP %u", (unsigned)r->status);
    size_t at = n;
    bool space = true;
    for (size_t i = 0; i < r->body_len && i < 400 && at + 2 < sizeof excerpt; i++) {
        char c = r->body[i];
        bool ws = c == ' ' || c == '\n' || c == '\r' || c == '\t';
        if (ws) {
            space = true;
            continue;
        }
        if (at == n) {
            excerpt[at++] = ':';
            space = true;
        }
        if (space) excerpt[at++] = ' ';
        space = false;
        excerpt[at++] = c;
    }
    excerpt[at] = 0;
    return excerpt;
}

/* ---- the reply ---- */

enum { NONE, ALL, EACH, SPLIT, BAD_ROW };

struct sluice_reply {
    int kind;
    sluice_fate fate;
    char *reason;
    size_t row;
    size_t count;
    sluice_fate *fates;
    char **reasons;
};

static char *vformat(const char *fmt, va_list ap) {
    if (!fmt) return NULL;
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = malloc((size_t)(n < 0 ? 0 : n) + 1);
    if (!s) __builtin_trap();
    vsnprintf(s, (size_t)n + 1, fmt, again);
    va_end(again);
    return s;
}

static void set(sluice_reply *reply, int kind, char *reason) {
    free(reply->reason);
    reply->kind = kind;
    reply->reason = reason;
}

void sluice_reply_all(sluice_reply *reply, sluice_fate fate, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set(reply, ALL, vformat(fmt, ap));
    va_end(ap);
    reply->fate = fate;
}

void sluice_reply_one(sluice_reply *reply, size_t i, sluice_fate fate, const char *fmt, ...) {
    if (i >= reply->count) return;
    if (reply->kind != EACH) set(reply, EACH, NULL);
    va_list ap;
    va_start(ap, fmt);
    free(reply->reasons[i]);
    reply->reasons[i] = vformat(fmt, ap);
    va_end(ap);
    reply->fates[i] = fate;
}

void sluice_reply_split(sluice_reply *reply, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set(reply, SPLIT, vformat(fmt, ap));
    va_end(ap);
}

void sluice_reply_bad_row(sluice_reply *reply, size_t row, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set(reply, BAD_ROW, vformat(fmt, ap));
    va_end(ap);
    reply->row = row;
}

void sluice_classifier_info(const char *message) {
    classifier_string_t m;
    classifier_string_set(&m, message);
    sluice_plugin_log_log(SLUICE_PLUGIN_TYPES_LEVEL_INFO, &m);
}

/* A reason handed over to the bindings (they free it after the call). */
static classifier_string_t owned(char *s) {
    classifier_string_t out = {0};
    if (s) {
        out.ptr = (uint8_t *)s;
        out.len = strlen(s);
    } else {
        classifier_string_dup(&out, "");
    }
    return out;
}

static sluice_plugin_answers_fate_t lower_fate(sluice_fate fate, char *reason) {
    sluice_plugin_answers_fate_t f = {0};
    switch (fate) {
    case SLUICE_ACCEPTED:
        f.tag = SLUICE_PLUGIN_ANSWERS_FATE_ACCEPTED;
        free(reason);
        break;
    case SLUICE_DUPLICATE:
        f.tag = SLUICE_PLUGIN_ANSWERS_FATE_DUPLICATE;
        free(reason);
        break;
    case SLUICE_RETRY:
        f.tag = SLUICE_PLUGIN_ANSWERS_FATE_RETRY;
        f.val.retry = owned(reason);
        break;
    case SLUICE_REJECT:
        f.tag = SLUICE_PLUGIN_ANSWERS_FATE_REJECT;
        f.val.reject = owned(reason);
        break;
    default:
        f.tag = SLUICE_PLUGIN_ANSWERS_FATE_SYSTEMIC;
        f.val.systemic = owned(reason);
        break;
    }
    return f;
}

/* ---- the exports ---- */

static bool ready = false;

bool exports_classifier_init(classifier_string_t *config, classifier_string_t *err) {
    const char *refusal = sluice_setup_config_(config->ptr, config->len, sluice_classifier_setup_);
    classifier_string_free(config);
    if (refusal) {
        classifier_string_dup(err, refusal);
        return false;
    }
    ready = true;
    return true;
}

void exports_classifier_classify(classifier_request_t *request, classifier_response_t *response,
                                 classifier_reply_t *ret) {
    sluice_request req = {
        .count = request->records.len / RECORD_BYTES,
        .body_bytes = request->body_bytes,
        .attempt = request->attempt,
        .records_ = request->records.ptr,
        .ids_ = request->ids.ptr,
        .ids_len_ = request->ids.len,
    };
    char *body = malloc(response->body.len + 1);
    if (!body) __builtin_trap();
    memcpy(body, response->body.ptr, response->body.len);
    body[response->body.len] = 0;
    sluice_response resp = {
        .status = response->status,
        .body = body,
        .body_len = response->body.len,
        .truncated = response->truncated,
        .headers_ = response->headers.ptr,
        .header_count_ = response->headers.len,
    };
    sluice_reply reply = {.kind = NONE, .count = req.count};
    reply.fates = calloc(req.count ? req.count : 1, sizeof *reply.fates);
    reply.reasons = calloc(req.count ? req.count : 1, sizeof *reply.reasons);
    if (!reply.fates || !reply.reasons) __builtin_trap();
    if (!ready) sluice_reply_all(&reply, SLUICE_SYSTEMIC, "classifier used before init");
    else sluice_classifier_classify_(&req, &resp, &reply);
    switch (reply.kind) {
    case ALL:
        ret->tag = SLUICE_PLUGIN_ANSWERS_REPLY_ALL;
        ret->val.all = lower_fate(reply.fate, reply.reason);
        break;
    case EACH:
        ret->tag = SLUICE_PLUGIN_ANSWERS_REPLY_EACH;
        ret->val.each.ptr = malloc((req.count ? req.count : 1) * sizeof *ret->val.each.ptr);
        if (!ret->val.each.ptr) __builtin_trap();
        ret->val.each.len = req.count;
        for (size_t i = 0; i < req.count; i++) ret->val.each.ptr[i] = lower_fate(reply.fates[i], reply.reasons[i]);
        free(reply.reason);
        break;
    case SPLIT:
        ret->tag = SLUICE_PLUGIN_ANSWERS_REPLY_SPLIT;
        ret->val.split = owned(reply.reason);
        break;
    case BAD_ROW:
        ret->tag = SLUICE_PLUGIN_ANSWERS_REPLY_BAD_ROW;
        ret->val.bad_row.row = (uint32_t)reply.row;
        ret->val.bad_row.reason = owned(reply.reason);
        break;
    default:
        ret->tag = SLUICE_PLUGIN_ANSWERS_REPLY_ALL;
        ret->val.all = lower_fate(SLUICE_SYSTEMIC, strdup("the classifier gave no reply"));
        break;
    }
    if (reply.kind != EACH)
        for (size_t i = 0; i < req.count; i++) free(reply.reasons[i]);
    free(reply.fates);
    free(reply.reasons);
    free(body);
    classifier_request_free(request);
    classifier_response_free(response);
}
