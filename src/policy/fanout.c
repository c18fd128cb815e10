/* Fan-out adapters (see fanout.h). */
#include "policy/fanout.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int name_field(json_t *o, const char *k, char *out, vr_errbuf *err) {
  json_t *v = json_object_get(o, k);
  if (!json_is_string(v) || !json_string_length(v) ||
      json_string_length(v) >= VR_FANOUT_NAME_MAX)
    return vr_errf(err, VR_EINVAL, "adapter: \"%s\" must be a tensor name (1..%d chars)", k,
                   VR_FANOUT_NAME_MAX - 1);
  snprintf(out, VR_FANOUT_NAME_MAX, "%s", json_string_value(v));
  return 0;
}

static int parse_obj(json_t *o, vr_fanout *a, vr_errbuf *err) {
  if (!json_is_object(o)) return vr_errf(err, VR_EINVAL, "adapter must be a JSON object");
  const char *kind = json_string_value(json_object_get(o, "kind"));
  if (!kind) return vr_errf(err, VR_EINVAL, "adapter: \"kind\" missing (\"grid_crop\")");
  if (strcmp(kind, "grid_crop"))
    return vr_errf(err, VR_EINVAL, "adapter: unknown kind '%.64s' (known: grid_crop)", kind);
  a->kind = VR_FANOUT_GRID_CROP;
  int rc = name_field(o, "scores", a->scores, err);
  if (!rc) rc = name_field(o, "labels", a->labels, err);
  if (rc) return rc;
  json_t *t = json_object_get(o, "threshold");
  if (!json_is_number(t) || !(json_number_value(t) >= 0) || json_number_value(t) >= 1)
    return vr_errf(err, VR_EINVAL, "adapter: \"threshold\" must be a number in [0, 1)");
  a->threshold = json_number_value(t);
  json_t *g = json_object_get(o, "grid");
  if (!json_is_array(g) || json_array_size(g) != 2 ||
      !json_is_integer(json_array_get(g, 0)) || !json_is_integer(json_array_get(g, 1)))
    return vr_errf(err, VR_EINVAL, "adapter: \"grid\" must be [rows, cols]");
  json_int_t gh = json_integer_value(json_array_get(g, 0));
  json_int_t gw = json_integer_value(json_array_get(g, 1));
  if (gh < 1 || gw < 1 || gh > 1024 || gw > 1024 || gh * gw > 1024) /* no overflow */
    return vr_errf(err, VR_EINVAL, "adapter: grid %lldx%lld outside 1..1024 regions",
                   (long long)gh, (long long)gw);
  a->grid_h = (int)gh;
  a->grid_w = (int)gw;
  json_t *ln = json_object_get(o, "label_names");
  size_t nl = json_array_size(ln);
  if (!json_is_array(ln) || nl < 1 || nl > VR_FANOUT_MAX_LABELS)
    return vr_errf(err, VR_EINVAL, "adapter: \"label_names\" must list 1..%d labels",
                   VR_FANOUT_MAX_LABELS);
  for (size_t i = 0; i < nl; i++) {
    json_t *s = json_array_get(ln, i);
    if (!json_is_string(s) || !json_string_length(s) ||
        json_string_length(s) >= VR_FANOUT_NAME_MAX)
      return vr_errf(err, VR_EINVAL, "adapter: label_names[%zu] must be a short string", i);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(a->label_names[j], json_string_value(s)))
        return vr_errf(err, VR_EINVAL, "adapter: label '%s' listed twice", a->label_names[j]);
    snprintf(a->label_names[i], VR_FANOUT_NAME_MAX, "%s", json_string_value(s));
  }
  a->n_labels = (int)nl;
  return 0;
}

int vr_fanout_parse(const char *json, size_t len, vr_fanout *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *o = json_loadb(json, len, 0, &je);
  if (!o) return vr_errf(err, VR_EFORMAT, "adapter: bad JSON: %s", je.text);
  int rc = parse_obj(o, out, err);
  json_decref(o);
  if (rc) memset(out, 0, sizeof *out);
  return rc;
}

int vr_fanout_label(const vr_fanout *a, const char *name) {
  for (int i = 0; i < a->n_labels; i++)
    if (!strcmp(a->label_names[i], name)) return i;
  return -1;
}

int vr_fanout_crop_shape(const vr_fanout *a, const int64_t in_chw[3], int64_t crop_chw[3],
                         vr_errbuf *err) {
  if (a->kind != VR_FANOUT_GRID_CROP)
    return vr_errf(err, VR_EINVAL, "adapter: no crops without a grid_crop adapter");
  if (in_chw[0] < 1 || in_chw[1] < a->grid_h || in_chw[2] < a->grid_w ||
      in_chw[1] % a->grid_h || in_chw[2] % a->grid_w)
    return vr_errf(err, VR_EINVAL,
                   "adapter: input [%lld,%lld,%lld] does not divide into a %dx%d grid",
                   (long long)in_chw[0], (long long)in_chw[1], (long long)in_chw[2],
                   a->grid_h, a->grid_w);
  crop_chw[0] = in_chw[0];
  crop_chw[1] = in_chw[1] / a->grid_h;
  crop_chw[2] = in_chw[2] / a->grid_w;
  return 0;
}

int vr_fanout_regions(const vr_fanout *a, const float *scores, const float *labels,
                      const int64_t in_chw[3], vr_fanout_region *out, int cap) {
  if (a->kind != VR_FANOUT_GRID_CROP) return 0;
  int n = 0, R = a->grid_h * a->grid_w;
  int64_t ch = in_chw[1] / a->grid_h, cw = in_chw[2] / a->grid_w;
  for (int r = 0; r < R && n < cap; r++) {
    float s = scores[r];
    if (!(s > a->threshold)) continue; /* NaN never fans out */
    const float *p = labels + (size_t)r * a->n_labels;
    int best = 0;
    for (int l = 1; l < a->n_labels; l++)
      if (p[l] > p[best]) best = l;
    out[n++] = (vr_fanout_region){r, best, s, (int)((r / a->grid_w) * ch),
                                  (int)((r % a->grid_w) * cw)};
  }
  return n;
}

void vr_fanout_crop(const vr_fanout *a, const float *in, const int64_t in_chw[3],
                    const vr_fanout_region *g, float *out) {
  int64_t C = in_chw[0], H = in_chw[1], W = in_chw[2];
  int64_t ch = H / a->grid_h, cw = W / a->grid_w;
  for (int64_t c = 0; c < C; c++)
    for (int64_t y = 0; y < ch; y++)
      memcpy(out + (c * ch + y) * cw, in + (c * H + g->y0 + y) * W + g->x0,
             (size_t)cw * sizeof *out);
}

double vr_fanout_hop_slo_ms(double remaining_ms, int levels) {
  return remaining_ms / (levels > 1 ? levels : 1);
}

double vr_fanout_task_min_accuracy(double min_pct, int depth) {
  if (!(min_pct > 0)) return 0;
  if (min_pct > 100) min_pct = 100;
  return 100.0 * pow(min_pct / 100.0, 1.0 / (depth > 1 ? depth : 1));
}
