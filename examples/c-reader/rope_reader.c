/*
 * rope_reader: what a native forward needs from a ropekit export, and nothing else.
 *
 *   cc -O2 -o rope_reader rope_reader.c -lm
 *   ropekit export config.json --out export/ --positions 4096
 *   ./rope_reader export/ 4000
 *   ./rope_reader export/ 4000 17 250      (a multimodal export: one position per axis, T H W)
 *
 * The manifest is checked before anything is trusted: malformed records, file names that would leave
 * the export folder, and table files whose size differs from the manifest are refused (exit 2).
 *
 * For every layer type in export/manifest.txt it reads the float64 inv_freq table and the
 * attention factor, computes cos/sin at POSITION in double precision (angles reduced in float64),
 * and, when the export carries a float32 cos/sin cache, checks the cached row against them.
 * There is no rope_type code here: llama3, yarn, longrope, proportional... all arrive as numbers.
 *
 * A multimodal table (Qwen2-VL, Qwen3-VL, GLM-4V, ERNIE-4.5-VL...) also comes as numbers: per cos/sin
 * column, the position axis and the inv_freq index it uses (mrope_axis / mrope_freq, int32). Given one
 * position per axis the reader composes the row from the position streams; given one position, it is
 * a text position (the same on every axis).
 *
 * Output, one line per pair:   <layer> <pair> <cos> <sin>
 * for a multimodal layer, one line per column:   <layer> mrope_column <column> <cos> <sin>
 * and per layer with a cache:  <layer> cache_max_abs_diff <value>
 * and per layer whose attention scales queries by position (Ministral-3, Mistral-4):
 *                               <layer> query_scale <value>    (q *= value after rotating)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE 4096
#define MAX_PATH 2048
#define MAX_AXES 8

struct layer {
    char name[256], inv_freq[MAX_PATH], cos[MAX_PATH], sin[MAX_PATH], layout[16], cache_dtype[16];
    char mrope_axis[MAX_PATH], mrope_freq[MAX_PATH];
    long pairs, positions, mrope_axes, mrope_columns, query_scale_original;
    double attention_factor, query_scale_beta;
};

static int host_is_little_endian(void) {
    const uint16_t probe = 1;
    return *(const uint8_t *)&probe == 1;
}

static void swap_bytes(void *data, size_t count, size_t width) {
    uint8_t *bytes = data;
    for (size_t i = 0; i < count; i++)
        for (size_t j = 0; j < width / 2; j++) {
            uint8_t t = bytes[i * width + j];
            bytes[i * width + j] = bytes[i * width + width - 1 - j];
            bytes[i * width + width - 1 - j] = t;
        }
}

/* A file name from the manifest must stay inside the export: no '/', no '\\', no leading '.'. */
static int safe_name(const char *name) {
    return name[0] && name[0] != '.' && !strchr(name, '/') && !strchr(name, '\\');
}

/* The size of dir/name in bytes, or -1. */
static long file_size(const char *dir, const char *name) {
    char path[2 * MAX_PATH + 2];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen(path, "rb");
    if (!file) return -1;
    long size = fseek(file, 0, SEEK_END) == 0 ? ftell(file) : -1;
    fclose(file);
    return size;
}

/* Read `count` little-endian values of `width` bytes from dir/name at element offset `offset`. */
static int read_le(const char *dir, const char *name, long offset, void *out, size_t count, size_t width) {
    char path[2 * MAX_PATH + 2];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen(path, "rb");
    if (!file) { fprintf(stderr, "rope_reader: cannot open %s\n", path); return -1; }
    if (fseek(file, offset * (long)width, SEEK_SET) != 0 || fread(out, width, count, file) != count) {
        fprintf(stderr, "rope_reader: %s is shorter than the manifest says\n", path);
        fclose(file);
        return -1;
    }
    fclose(file);
    if (!host_is_little_endian()) swap_bytes(out, count, width);
    return 0;
}

/* A whole positive decimal integer no larger than `most`, else -1. */
static long parse_count(const char *value, long most) {
    char *end = NULL;
    long parsed = strtol(value, &end, 10);
    return (end && !*end && parsed > 0 && parsed <= most) ? parsed : -1;
}

static int copy_token(char *to, size_t size, const char *value) {
    if (strlen(value) >= size) return -1;
    memcpy(to, value, strlen(value) + 1);
    return 0;
}

/* One manifest record; -1 for a malformed one (unknown keys are skipped for forward compatibility). */
static int parse_line(char *line, struct layer *layer) {
    memset(layer, 0, sizeof *layer);
    char *save = NULL, *key = strtok_r(line, " \t\n", &save);
    int bad = 0;
    while (key && !bad) {
        char *value = strtok_r(NULL, " \t\n", &save);
        if (!value) return -1;
        if (!strcmp(key, "layer")) bad = copy_token(layer->name, sizeof layer->name, value);
        else if (!strcmp(key, "pairs")) bad = (layer->pairs = parse_count(value, 1L << 20)) < 0;
        else if (!strcmp(key, "attention_factor")) {
            char *end = NULL;
            layer->attention_factor = strtod(value, &end);
            bad = !end || *end || !(layer->attention_factor > 0) || !isfinite(layer->attention_factor);
        }
        else if (!strcmp(key, "inv_freq")) bad = copy_token(layer->inv_freq, sizeof layer->inv_freq, value);
        else if (!strcmp(key, "positions")) bad = (layer->positions = parse_count(value, 1L << 32)) < 0;
        else if (!strcmp(key, "cache_dtype")) bad = copy_token(layer->cache_dtype, sizeof layer->cache_dtype, value);
        else if (!strcmp(key, "layout")) bad = copy_token(layer->layout, sizeof layer->layout, value);
        else if (!strcmp(key, "cos")) bad = copy_token(layer->cos, sizeof layer->cos, value);
        else if (!strcmp(key, "sin")) bad = copy_token(layer->sin, sizeof layer->sin, value);
        else if (!strcmp(key, "query_scale_beta")) {
            char *end = NULL;
            layer->query_scale_beta = strtod(value, &end);
            bad = !end || *end || !(layer->query_scale_beta >= 0) || !isfinite(layer->query_scale_beta);
        }
        else if (!strcmp(key, "query_scale_original")) bad = (layer->query_scale_original = parse_count(value, 1L << 40)) < 0;
        else if (!strcmp(key, "mrope_axes")) bad = (layer->mrope_axes = parse_count(value, MAX_AXES)) < 0;
        else if (!strcmp(key, "mrope_columns")) bad = (layer->mrope_columns = parse_count(value, 1L << 21)) < 0;
        else if (!strcmp(key, "mrope_axis")) bad = copy_token(layer->mrope_axis, sizeof layer->mrope_axis, value);
        else if (!strcmp(key, "mrope_freq")) bad = copy_token(layer->mrope_freq, sizeof layer->mrope_freq, value);
        key = strtok_r(NULL, " \t\n", &save);
    }
    if (bad || layer->pairs <= 0 || !layer->name[0] || !safe_name(layer->inv_freq)) return -1;
    if (layer->cos[0] && (!safe_name(layer->cos) || !safe_name(layer->sin) || layer->positions <= 0)) return -1;
    if (layer->mrope_axis[0] && (!safe_name(layer->mrope_axis) || !safe_name(layer->mrope_freq)
                                 || layer->mrope_axes <= 0 || layer->mrope_columns <= 0)) return -1;
    return 0;
}

/* The files hold exactly what the manifest says: a truncated or padded table is refused. */
static int check_sizes(const char *dir, const struct layer *layer) {
    if (file_size(dir, layer->inv_freq) != layer->pairs * 8) {
        fprintf(stderr, "rope_reader: %s/%s does not hold %ld float64 values\n", dir, layer->inv_freq, layer->pairs);
        return -1;
    }
    if (layer->mrope_axis[0] && (file_size(dir, layer->mrope_axis) != layer->mrope_columns * 4
                                 || file_size(dir, layer->mrope_freq) != layer->mrope_columns * 4)) {
        fprintf(stderr, "rope_reader: the mrope column maps of %s are not %ld int32 values\n", layer->name,
                layer->mrope_columns);
        return -1;
    }
    if (layer->cos[0]) {
        long width = !strcmp(layer->cache_dtype, "float64") ? 8 : !strcmp(layer->cache_dtype, "float16") ? 2 : 4;
        long columns = !strcmp(layer->layout, "half") ? layer->pairs : 2 * layer->pairs;
        long want = layer->positions * columns * width;
        if (file_size(dir, layer->cos) != want || file_size(dir, layer->sin) != want) {
            fprintf(stderr, "rope_reader: the cos/sin caches of %s are not %ld bytes each\n", layer->name, want);
            return -1;
        }
    }
    return 0;
}

/* A multimodal layer: column c is cos(positions[axis[c]] * inv_freq[freq[c]]) * attention_factor. */
static int serve_mrope(const char *dir, const struct layer *layer, const long *positions, int count) {
    if (count != 1 && count != layer->mrope_axes) {
        fprintf(stderr, "rope_reader: %s takes %ld positions (one per axis) or one text position, got %d\n",
                layer->name, layer->mrope_axes, count);
        return 2;
    }
    size_t columns = (size_t)layer->mrope_columns;
    double *inv_freq = malloc(sizeof(double) * (size_t)layer->pairs);
    int32_t *axis = malloc(sizeof(int32_t) * columns), *freq = malloc(sizeof(int32_t) * columns);
    float *row = malloc(sizeof(float) * columns);
    int status = 1;
    if (!inv_freq || !axis || !freq || !row) goto done;
    if (read_le(dir, layer->inv_freq, 0, inv_freq, (size_t)layer->pairs, sizeof(double))
        || read_le(dir, layer->mrope_axis, 0, axis, columns, sizeof(int32_t))
        || read_le(dir, layer->mrope_freq, 0, freq, columns, sizeof(int32_t))) goto done;
    for (size_t c = 0; c < columns; c++)
        if (axis[c] < 0 || axis[c] >= layer->mrope_axes || freq[c] < 0 || freq[c] >= layer->pairs) {
            fprintf(stderr, "rope_reader: %s: column %zu names axis %d / frequency %d out of range\n", layer->name,
                    c, (int)axis[c], (int)freq[c]);
            status = 2;
            goto done;
        }
    double worst = 0.0;
    int check = layer->cos[0] && !strcmp(layer->cache_dtype, "float32") && count == 1
                && positions[0] < layer->positions;
    float *sin_row = check ? malloc(sizeof(float) * columns) : NULL;
    if (check && (!sin_row || read_le(dir, layer->cos, positions[0] * (long)columns, row, columns, sizeof(float))
                  || read_le(dir, layer->sin, positions[0] * (long)columns, sin_row, columns, sizeof(float)))) {
        free(sin_row);
        goto done;
    }
    for (size_t c = 0; c < columns; c++) {
        double angle = (double)positions[count == 1 ? 0 : axis[c]] * inv_freq[freq[c]];
        double cos_v = cos(angle) * layer->attention_factor, sin_v = sin(angle) * layer->attention_factor;
        printf("%s mrope_column %zu %.17g %.17g\n", layer->name, c, cos_v, sin_v);
        if (check) worst = fmax(worst, fmax(fabs(row[c] - cos_v), fabs(sin_row[c] - sin_v)));
    }
    if (check) printf("%s cache_max_abs_diff %.3g\n", layer->name, worst);
    free(sin_row);
    status = 0;
done:
    free(inv_freq); free(axis); free(freq); free(row);
    return status;
}

static int serve(const char *dir, const struct layer *layer, long position) {
    double *inv_freq = malloc(sizeof(double) * (size_t)layer->pairs);
    double *cos_v = malloc(sizeof(double) * (size_t)layer->pairs);
    double *sin_v = malloc(sizeof(double) * (size_t)layer->pairs);
    float *row = malloc(sizeof(float) * 2 * (size_t)layer->pairs);
    int status = -1;
    if (!inv_freq || !cos_v || !sin_v || !row) goto done;
    if (read_le(dir, layer->inv_freq, 0, inv_freq, (size_t)layer->pairs, sizeof(double))) goto done;
    for (long i = 0; i < layer->pairs; i++) {
        double angle = (double)position * inv_freq[i];
        cos_v[i] = cos(angle) * layer->attention_factor;
        sin_v[i] = sin(angle) * layer->attention_factor;
        printf("%s %ld %.17g %.17g\n", layer->name, i, cos_v[i], sin_v[i]);
    }
    if (layer->cos[0] && !strcmp(layer->cache_dtype, "float32") && position < layer->positions) {
        double worst = 0.0;
        const char *files[2] = {layer->cos, layer->sin};
        const double *want[2] = {cos_v, sin_v};
        int half = !strcmp(layer->layout, "half"), neox = strcmp(layer->layout, "gptj") != 0;
        long columns = half ? layer->pairs : 2 * layer->pairs;
        for (int f = 0; f < 2; f++) {
            if (read_le(dir, files[f], position * columns, row, (size_t)columns, sizeof(float)))
                goto done;
            for (long i = 0; i < layer->pairs; i++) {
                /* half: one column per pair; neox: pair i at i and i + pairs; gptj: at 2i and 2i + 1 */
                double a = row[half || neox ? i : 2 * i];
                double b = half ? a : row[neox ? i + layer->pairs : 2 * i + 1];
                worst = fmax(worst, fmax(fabs(a - want[f][i]), fabs(b - want[f][i])));
            }
        }
        printf("%s cache_max_abs_diff %.3g\n", layer->name, worst);
    }
    status = 0;
done:
    free(inv_freq); free(cos_v); free(sin_v); free(row);
    return status;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 3 + MAX_AXES - 1) {
        fprintf(stderr, "usage: rope_reader EXPORT_DIR POSITION [POSITION ...]  (one per axis for multimodal)\n");
        return 2;
    }
    char path[MAX_PATH + 16], line[MAX_LINE];
    snprintf(path, sizeof path, "%s/manifest.txt", argv[1]);
    FILE *manifest = fopen(path, "r");
    if (!manifest) { fprintf(stderr, "rope_reader: cannot open %s\n", path); return 2; }
    long positions[MAX_AXES];
    int count = argc - 2;
    for (int i = 0; i < count; i++) {
        char *end = NULL;
        positions[i] = strtol(argv[2 + i], &end, 10);
        if (!end || *end || positions[i] < 0) {
            fprintf(stderr, "rope_reader: POSITION must be a non-negative integer\n");
            fclose(manifest);
            return 2;
        }
    }
    long position = positions[0];
    int layers = 0, status = 0;
    while (fgets(line, sizeof line, manifest)) {
        struct layer layer;
        if (!strchr(line, '\n')) { fprintf(stderr, "rope_reader: manifest line too long\n"); status = 2; break; }
        if (line[0] == '#' || line[0] == '\n') continue;
        if (parse_line(line, &layer)) { fprintf(stderr, "rope_reader: bad manifest line\n"); status = 2; break; }
        if (check_sizes(argv[1], &layer)) { status = 2; break; }
        if (layer.query_scale_original > 0)
            printf("%s query_scale %.17g\n", layer.name,
                   1.0 + layer.query_scale_beta * log1p(floor((double)position / (double)layer.query_scale_original)));
        if (layer.mrope_axis[0]) {
            if ((status = serve_mrope(argv[1], &layer, positions, count))) break;
        } else if (count != 1) {
            fprintf(stderr, "rope_reader: %s is a text table: give one position\n", layer.name);
            status = 2;
            break;
        } else if (serve(argv[1], &layer, position)) { status = 1; break; }
        layers++;
    }
    fclose(manifest);
    if (!status && !layers) { fprintf(stderr, "rope_reader: no layers in %s\n", path); status = 2; }
    return status;
}
