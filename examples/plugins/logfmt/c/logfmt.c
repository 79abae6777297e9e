/* logfmt lines in, one JSON object out (see the README beside it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice_plugin.h"

static char *id_field; /* the pair whose value becomes the event id, or NULL */

static const char *setup(const char *config) {
    static char refusal[160];
    size_t pos = 0;
    sluice_bytes key;
    int more;
    while ((more = sluice_config_next_key(config, &pos, &key)) == 1) {
        if (key.len == 8 && memcmp(key.ptr, "id_field", 8) == 0) continue;
        snprintf(refusal, sizeof refusal, "unknown config key \"%.*s\" (known: id_field)", (int)key.len, key.ptr);
        return refusal;
    }
    if (more < 0) return "the config is not a JSON object";
    if (sluice_config_string(config, "id_field", &id_field) < 0) return "id_field: must be a string";
    return NULL;
}

typedef struct {
    const char *key, *value; /* value NULL: a bare key, which maps to true */
    size_t key_len, value_len;
} pair;

static void process(const sluice_record *r, sluice_out *out) {
    const char *line = (const char *)r->payload.ptr;
    size_t n = r->payload.len;
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
    size_t blank = 0;
    while (blank < n && (line[blank] == ' ' || line[blank] == '\t')) blank++;
    if (blank == n) {
        sluice_drop(out, "blank line");
        return;
    }
    /* Values with escapes are rebuilt in `unescaped`; each pair points into
     * the line or into it (reserved up front, so it never moves). */
    pair *pairs = malloc(sizeof(pair) * (n / 2 + 1));
    char *unescaped = malloc(n + 1);
    size_t count = 0, u = 0, i = 0;
    while (i < n) {
        while (i < n && line[i] == ' ') i++;
        size_t start = i;
        while (i < n && line[i] != '=' && line[i] != ' ') i++;
        pair p = {line + start, NULL, i - start, 0};
        if (i < n && line[i] == '=') {
            i++;
            if (i < n && line[i] == '"') {
                i++;
                p.value = unescaped + u;
                while (i < n && line[i] != '"') {
                    if (line[i] == '\\' && i + 1 < n && (line[i + 1] == '"' || line[i + 1] == '\\')) i++;
                    unescaped[u++] = line[i++];
                }
                p.value_len = (size_t)(unescaped + u - p.value);
                i++;
            } else {
                p.value = line + i;
                while (i < n && line[i] != ' ') i++;
                p.value_len = (size_t)(line + i - p.value);
            }
        }
        if (p.key_len) pairs[count++] = p;
    }
    if (count == 0) {
        sluice_reject(out, "no key=value pair in the line");
    } else {
        sluice_buf body = {0};
        const pair *id = NULL;
        sluice_json_open(&body);
        for (size_t k = 0; k < count; k++) {
            /* A key that comes again later: the last one wins. */
            bool later = false;
            for (size_t j = k + 1; j < count && !later; j++)
                later = pairs[j].key_len == pairs[k].key_len && !memcmp(pairs[j].key, pairs[k].key, pairs[k].key_len);
            if (later) continue;
            sluice_json_key_n(&body, pairs[k].key, pairs[k].key_len);
            if (pairs[k].value) sluice_json_string(&body, pairs[k].value, pairs[k].value_len);
            else sluice_json_raw(&body, "true");
            if (id_field && pairs[k].value && strlen(id_field) == pairs[k].key_len &&
                !memcmp(id_field, pairs[k].key, pairs[k].key_len))
                id = &pairs[k];
        }
        sluice_json_close(&body);
        sluice_event e = {.body = body.ptr, .body_len = body.len};
        if (id && id->value_len) {
            e.id = id->value;
            e.id_len = id->value_len;
        }
        sluice_emit(out, &e);
        sluice_buf_free(&body);
    }
    free(unescaped);
    free(pairs);
}

SLUICE_PLUGIN(setup, process)
