/* Reading JSON text in place, without a parser's allocations: the
 * config `init` receives, and (for classifiers) a backend's answer; and
 * `init`'s own plumbing. Shared by the plugin and classifier SDKs; every function reads NUL-terminated
 * text (a value found inside it is a view: pass its `ptr` on to read
 * deeper, since the text around it is still terminated). */
#include <stdlib.h>
#include <string.h>

#include "sluice_json_read.h"


static size_t skip_ws(const char *s, size_t i) {
    while (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') i++;
    return i;
}

/* Past the JSON string starting at s[i] == '"'; 0 if unterminated. */
static size_t skip_string(const char *s, size_t i) {
    for (i++; s[i]; i++) {
        if (s[i] == '\\' && s[i + 1]) i++;
        else if (s[i] == '"') return i + 1;
    }
    return 0;
}

/* Past the JSON value at s[i]; 0 if malformed. */
static size_t skip_value(const char *s, size_t i) {
    i = skip_ws(s, i);
    if (s[i] == '"') return skip_string(s, i);
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        while (s[i]) {
            if (s[i] == '"') {
                i = skip_string(s, i);
                if (!i) return 0;
                continue;
            }
            if (s[i] == '{' || s[i] == '[') depth++;
            if (s[i] == '}' || s[i] == ']') {
                if (--depth == 0) return i + 1;
            }
            i++;
        }
        return 0;
    }
    size_t start = i;
    while (s[i] && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\n') i++;
    return i > start ? i : 0;
}

int sluice_config_next_key(const char *config, size_t *pos, sluice_bytes *key) {
    size_t i = skip_ws(config, *pos);
    if (*pos == 0) {
        if (config[i] != '{') return -1;
        i = skip_ws(config, i + 1);
    } else if (config[i] == ',') {
        i = skip_ws(config, i + 1);
    }
    if (config[i] == '}') return 0;
    if (config[i] != '"') return -1;
    size_t end = skip_string(config, i);
    if (!end) return -1;
    key->ptr = (const uint8_t *)config + i + 1;
    key->len = end - i - 2;
    i = skip_ws(config, end);
    if (config[i] != ':') return -1;
    i = skip_value(config, i + 1);
    if (!i) return -1;
    *pos = skip_ws(config, i);
    return 1;
}

int sluice_config_string(const char *config, const char *key, char **value) {
    sluice_bytes raw;
    int found = sluice_json_member(config, key, &raw);
    if (found != 1) return found;
    if (raw.len < 2 || raw.ptr[0] != '"') return -1;
    size_t v = (size_t)((const char *)raw.ptr - config);
    size_t end = v + raw.len;
    char *out = malloc(end - v);
    if (!out) __builtin_trap();
    size_t n = 0;
    for (size_t i = v + 1; i < end - 1; i++) {
        if (config[i] == '\\' && config[i + 1] == 'u' && i + 5 < end - 1) {
            /* \uXXXX, as UTF-8 (a surrogate pair is kept as two). */
            unsigned cp = (unsigned)strtoul((char[5]){config[i + 2], config[i + 3], config[i + 4], config[i + 5], 0}, NULL, 16);
            if (cp < 0x80) {
                out[n++] = (char)cp;
            } else if (cp < 0x800) {
                out[n++] = (char)(0xc0 | cp >> 6);
                out[n++] = (char)(0x80 | (cp & 0x3f));
            } else {
                out[n++] = (char)(0xe0 | cp >> 12);
                out[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[n++] = (char)(0x80 | (cp & 0x3f));
            }
            i += 5;
        } else if (config[i] == '\\') {
            i++;
            char c = config[i];
            out[n++] = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
        } else {
            out[n++] = config[i];
        }
    }
    out[n] = 0;
    *value = out;
    return 1;
}

int sluice_json_member(const char *object, const char *key, sluice_bytes *raw) {
    size_t pos = 0;
    sluice_bytes k;
    int found;
    size_t klen = strlen(key);
    while ((found = sluice_config_next_key(object, &pos, &k)) == 1) {
        if (k.len != klen || memcmp(k.ptr, key, klen) != 0) continue;
        size_t v = skip_ws(object, (size_t)((const char *)k.ptr - object) + k.len + 1);
        v = skip_ws(object, v + 1); /* past ':' */
        size_t end = skip_value(object, v);
        raw->ptr = (const uint8_t *)object + v;
        raw->len = end - v;
        return 1;
    }
    return found < 0 ? -1 : 0;
}

int sluice_json_next_item(const char *array, size_t *pos, sluice_bytes *item) {
    size_t i = skip_ws(array, *pos);
    if (*pos == 0) {
        if (array[i] != '[') return -1;
        i = skip_ws(array, i + 1);
    } else if (array[i] == ',') {
        i = skip_ws(array, i + 1);
    }
    if (array[i] == ']') return 0;
    size_t end = skip_value(array, i);
    if (!end) return -1;
    item->ptr = (const uint8_t *)array + i;
    item->len = end - i;
    *pos = skip_ws(array, end);
    return 1;
}

int sluice_json_int64(sluice_bytes raw, int64_t *value) {
    if (raw.len == 0 || raw.len > 20) return 0;
    char text[21];
    memcpy(text, raw.ptr, raw.len);
    text[raw.len] = 0;
    char *end;
    long long v = strtoll(text, &end, 10);
    if (*end != 0) return 0;
    *value = v;
    return 1;
}

const char *sluice_setup_config_(const uint8_t *config, size_t len, const char *(*setup)(const char *)) {
    char *text = malloc(len + 1);
    if (!text) __builtin_trap();
    memcpy(text, config, len);
    text[len] = 0;
    const char *refusal = setup ? setup(text) : NULL;
    free(text);
    return refusal;
}
