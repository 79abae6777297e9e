/* Axiom's ingest answers, read per record (../rust/src/lib.rs says why):
 * a failure names the time of the event it refused, so it is matched to
 * the one record sent with that time; otherwise split.
 *
 *     WORLD=classifier guest-sdk/c/build.sh axiom.c axiom.wasm */
#include <stdlib.h>
#include <string.h>

#include "sluice_classifier.h"

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

static bool digits(const char *s, size_t n, int64_t *v) {
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        *v = *v * 10 + (s[i] - '0');
    }
    return true;
}

/* `2024-05-01T12:00:01.5Z` (or with an offset) as ns since the epoch. */
static bool rfc3339_nanos(const char *s, int64_t *out) {
    size_t n = strlen(s);
    int64_t y, mo, d, h, mi, sec, frac = 0, offset = 0;
    if (n < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &d) || !(s[10] == 'T' || s[10] == 't' || s[10] == ' ') || !digits(s + 11, 2, &h) ||
        s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
        return false;
    size_t at = 19;
    if (s[at] == '.') {
        int places = 0;
        for (at++; s[at] >= '0' && s[at] <= '9'; at++)
            if (places < 9) frac = frac * 10 + (s[at] - '0'), places++;
        for (; places < 9; places++) frac *= 10;
    }
    if ((s[at] == 'Z' || s[at] == 'z') && at + 1 == n) {
        offset = 0;
    } else if ((s[at] == '+' || s[at] == '-') && at + 6 == n && s[at + 3] == ':') {
        int64_t oh, om;
        if (!digits(s + at + 1, 2, &oh) || !digits(s + at + 4, 2, &om)) return false;
        offset = (oh * 3600 + om * 60) * (s[at] == '-' ? -1 : 1);
    } else {
        return false;
    }
    *out = (days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset) * 1000000000 + frac;
    return true;
}

typedef struct {
    int64_t ns;
    size_t i;
} timed;

static int by_time(const void *a, const void *b) {
    int64_t x = ((const timed *)a)->ns, y = ((const timed *)b)->ns;
    return (x > y) - (x < y);
}

static void classify(const sluice_request *req, const sluice_response *resp, sluice_reply *reply) {
    size_t n = req->count;
    if (resp->status == 400 || resp->status == 413 || resp->status == 422) {
        sluice_reply_split(reply, "%s", sluice_response_excerpt(resp));
        return;
    }
    if (resp->status < 200 || resp->status > 299) {
        sluice_reply_all(reply, SLUICE_SYSTEMIC, "%s", sluice_response_excerpt(resp));
        return;
    }
    sluice_bytes raw, failures = {0};
    int64_t ingested, failed;
    if (resp->truncated || sluice_json_member(resp->body, "ingested", &raw) != 1 || !sluice_json_int64(raw, &ingested) ||
        sluice_json_member(resp->body, "failed", &raw) != 1 || !sluice_json_int64(raw, &failed)) {
        sluice_reply_all(reply, SLUICE_SYSTEMIC, "HTTP %u: the body is not the JSON expected (no ingested and failed counts)",
                         (unsigned)resp->status);
        return;
    }
    if (ingested + failed != (int64_t)n) {
        sluice_reply_all(reply, SLUICE_SYSTEMIC, "Axiom counted %lld ingested and %lld failed of the %zu sent",
                         (long long)ingested, (long long)failed, n);
        return;
    }
    if (failed == 0) {
        sluice_reply_all(reply, SLUICE_ACCEPTED, NULL);
        return;
    }
    const char *list = sluice_json_member(resp->body, "failures", &failures) == 1 ? (const char *)failures.ptr : "[]";
    sluice_bytes item;
    size_t pos = 0, listed = 0;
    char *first = NULL;
    while (sluice_json_next_item(list, &pos, &item) == 1) {
        if (listed++ == 0 && sluice_config_string((const char *)item.ptr, "error", &first) != 1) first = NULL;
    }
    const char *shown = first ? first : "no failure listed";
    if ((int64_t)listed != failed) goto whole;
    /* The records' times, sorted once: a failure's time is then found by
     * binary search, and a time two records share is seen beside itself. */
    timed *times = malloc((n ? n : 1) * sizeof *times);
    bool *taken = calloc(n ? n : 1, sizeof *taken);
    if (!times || !taken) __builtin_trap();
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (sluice_request_timestamp(req, i, &times[m].ns)) times[m++].i = i;
    qsort(times, m, sizeof *times, by_time);
    pos = 0;
    while (sluice_json_next_item(list, &pos, &item) == 1) {
        char *stamp = NULL, *error = NULL;
        timed key;
        const timed *hit = NULL;
        if (sluice_config_string((const char *)item.ptr, "timestamp", &stamp) == 1 && rfc3339_nanos(stamp, &key.ns))
            hit = bsearch(&key, times, m, sizeof *times, by_time);
        free(stamp);
        bool shared = hit && ((hit > times && hit[-1].ns == hit->ns) || (hit + 1 < times + m && hit[1].ns == hit->ns));
        if (!hit || shared || taken[hit->i]) {
            free(times);
            free(taken);
            goto whole;
        }
        taken[hit->i] = true;
        if (sluice_config_string((const char *)item.ptr, "error", &error) != 1) error = NULL;
        sluice_reply_one(reply, hit->i, SLUICE_REJECT, "axiom: %s", error ? error : "");
        free(error);
    }
    free(times);
    free(taken);
    free(first);
    return;
whole:
    sluice_reply_split(reply, "axiom: %lld of %zu failed: %s", (long long)failed, n, shown);
    free(first);
}

SLUICE_CLASSIFIER(NULL, classify)
