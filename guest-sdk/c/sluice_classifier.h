/* Write a sluice classifier plugin in C: a function that reads how a
 * backend answered one request of the HTTP sink (wit/classifier.wit).
 *
 *     #include "sluice_classifier.h"
 *
 *     static void classify(const sluice_request *req, const sluice_response *resp, sluice_reply *reply) {
 *         if (resp->status >= 200 && resp->status < 300) sluice_reply_all(reply, SLUICE_ACCEPTED, NULL);
 *         else if (resp->status == 400) sluice_reply_split(reply, "%s", sluice_response_excerpt(resp));
 *         else sluice_reply_all(reply, SLUICE_SYSTEMIC, "%s", sluice_response_excerpt(resp));
 *     }
 *
 *     SLUICE_CLASSIFIER(NULL, classify)
 *
 * `WORLD=classifier build.sh classifier.c classifier.wasm` builds it. The
 * host's fixed rules apply after the reply (a 404 stays systemic whatever
 * the classifier says); a reply left unset is systemic. JSON in the body
 * is read in place with sluice_json_member, sluice_json_next_item and
 * sluice_json_int64 (sluice_json_read.h): `resp->body` is NUL-terminated. */
#ifndef SLUICE_CLASSIFIER_H
#define SLUICE_CLASSIFIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice_json_read.h"

/* What was sent: read its records with the functions below. */
typedef struct {
    size_t count;
    /* The body's length before compression. */
    uint64_t body_bytes;
    /* Which send of these records this is, from 1. */
    uint32_t attempt;
    const uint8_t *records_;
    const uint8_t *ids_;
    size_t ids_len_;
} sluice_request;

/* Record i's event id (empty past the end). */
sluice_bytes sluice_request_id(const sluice_request *r, size_t i);
/* Record i's event time in ns since the epoch: false when it has none. */
bool sluice_request_timestamp(const sluice_request *r, size_t i, int64_t *nanos);
/* Where record i's bytes are in the request body. */
void sluice_request_span(const sluice_request *r, size_t i, uint32_t *start, uint32_t *len);

/* What came back. `body` is NUL-terminated (a NUL inside the body ends
 * what the JSON readers see). */
typedef struct {
    uint16_t status;
    const char *body;
    size_t body_len;
    /* The body was cut at `max_body_bytes`. */
    bool truncated;
    const void *headers_;
    size_t header_count_;
} sluice_response;

/* A header the config lets the classifier see (name in lower case):
 * false when absent. */
bool sluice_response_header(const sluice_response *r, const char *name, sluice_bytes *value);
/* "HTTP 400: <the body's start, white space folded>", valid during the call. */
const char *sluice_response_excerpt(const sluice_response *r);

typedef enum { SLUICE_ACCEPTED, SLUICE_DUPLICATE, SLUICE_RETRY, SLUICE_REJECT, SLUICE_SYSTEMIC } sluice_fate;

typedef struct sluice_reply sluice_reply;
/* Every record alike; `fmt` (printf) is the reason (NULL for none). */
void sluice_reply_all(sluice_reply *reply, sluice_fate fate, const char *fmt, ...);
/* Record i's own fate: the reply becomes one fate per record, the others
 * accepted unless set too. */
void sluice_reply_one(sluice_reply *reply, size_t i, sluice_fate fate, const char *fmt, ...);
/* Some records are bad and the answer does not say which: send halves. */
void sluice_reply_split(sluice_reply *reply, const char *fmt, ...);
/* Nothing was taken because of this row: reject it, send the rest again. */
void sluice_reply_bad_row(sluice_reply *reply, size_t row, const char *fmt, ...);

/* A line in the host's log. */
void sluice_classifier_info(const char *message);

/* `setup` (may be NULL) gets the config as JSON text and returns NULL to
 * accept it or a message naming the key at fault. */
typedef const char *(*sluice_classifier_setup_fn)(const char *config);
typedef void (*sluice_classify_fn)(const sluice_request *request, const sluice_response *response, sluice_reply *reply);

#define SLUICE_CLASSIFIER(setup_fn, classify_fn)                               \
    sluice_classifier_setup_fn sluice_classifier_setup_ = (setup_fn);          \
    sluice_classify_fn sluice_classifier_classify_ = (classify_fn);

#endif
