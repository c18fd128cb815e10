/* Fan-out adapter specs (policy/fanout.h): arbitrary bytes are rejected
 * with a message, or give an adapter whose regions, over scores and labels
 * drawn from the same bytes, all lie inside the input, pass the threshold
 * and name one of its labels. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "policy/fanout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_fanout a;
  vr_errbuf err = {0};
  if (vr_fanout_parse((const char *)data, size, &a, &err)) {
    if (!err.msg[0] || a.kind != VR_FANOUT_NONE) __builtin_trap();
    return 0;
  }
  int R = a.grid_h * a.grid_w;
  if (a.kind != VR_FANOUT_GRID_CROP || R < 1 || R > 1024 || a.n_labels < 1) __builtin_trap();
  int64_t in[3] = {1, (int64_t)a.grid_h * 2, (int64_t)a.grid_w * 3}, crop[3];
  if (vr_fanout_crop_shape(&a, in, crop, &err) || crop[1] != 2 || crop[2] != 3)
    __builtin_trap();
  static float sc[1024], lb[1024 * VR_FANOUT_MAX_LABELS], img[2 * 3 * 1024];
  for (int i = 0; i < R; i++) sc[i] = data[i % size] / 255.0f;
  for (int i = 0; i < R * a.n_labels; i++) lb[i] = data[(i * 7) % size] / 255.0f;
  if (size > 3) sc[0] = NAN;
  vr_fanout_region g[1024];
  int n = vr_fanout_regions(&a, sc, lb, in, g, 1024);
  if (n < 0 || n > R) __builtin_trap();
  float out[6];
  for (int i = 0; i < n; i++) {
    if (g[i].region < 0 || g[i].region >= R || !(g[i].score > a.threshold) ||
        g[i].label < 0 || g[i].label >= a.n_labels || g[i].y0 + crop[1] > in[1] ||
        g[i].x0 + crop[2] > in[2])
      __builtin_trap();
    vr_fanout_crop(&a, img, in, &g[i], out);
  }
  return 0;
}
