/* Reading JSON text in place (sluice_json_read.c): the config `init`
 * receives, and a backend's answer in a classifier. Each function reads
 * NUL-terminated text; a value it finds is a view into that text. */
#ifndef SLUICE_JSON_READ_H
#define SLUICE_JSON_READ_H

#include <stddef.h>
#include <stdint.h>

/* Bytes borrowed from the host's call: valid until it returns. */
typedef struct {
    const uint8_t *ptr;
    size_t len;
} sluice_bytes;

/* Walk an object's top-level keys: start with *pos = 0; returns 1 with the
 * key's raw text (between the quotes), 0 at the end, -1 if the JSON is bad. */
int sluice_config_next_key(const char *config, size_t *pos, sluice_bytes *key);
/* The string value of top-level `key`, unescaped, into a new NUL-terminated
 * malloc'd string: 1 found, 0 absent, -1 present but not a string. */
int sluice_config_string(const char *config, const char *key, char **value);
/* The raw JSON text of top-level `key`'s value (`12`, `"x"`, `[...]`):
 * 1 found, 0 absent, -1 if the JSON is bad. */
int sluice_json_member(const char *object, const char *key, sluice_bytes *raw);
/* Walk an array's items (raw JSON text each): start with *pos = 0;
 * 1 an item, 0 at the end, -1 if the JSON is bad. */
int sluice_json_next_item(const char *array, size_t *pos, sluice_bytes *item);
/* A raw JSON integer: 1 read, 0 not an integer. */
int sluice_json_int64(sluice_bytes raw, int64_t *value);

/* What `init` does in both worlds: the config the host passed (JSON text,
 * not NUL-terminated) handed to `setup` as NUL-terminated text, which
 * lives only for that call. Returns `setup`'s refusal, or NULL; a NULL
 * `setup` (a plugin without config) refuses nothing. Used by the SDKs'
 * `init`, not by plugins. */
const char *sluice_setup_config_(const uint8_t *config, size_t len, const char *(*setup)(const char *));

#endif
