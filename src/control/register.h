/*
 * Registration: a user's ONNX model + app + validation set (or declared
 * accuracy) becomes a registered model with generated, profiled variants.
 *
 * vr_register validates everything first (names, files, the validation set
 * against the model), profiles in memory, writes the repository entry
 * (<repo>/<name>/model.onnx, config.json, profiles/<variant>.json) under a
 * temporary name and renames it into place, and finally writes the store in
 * one transaction. Any failure removes the repository entry, so a rejected
 * or failed registration leaves nothing behind in the store or on disk.
 * Called by `vario register` and by the HTTP registration endpoint.
 */
#ifndef VR_CONTROL_REGISTER_H
#define VR_CONTROL_REGISTER_H

#include "control/profiler.h"
#include "control/store.h"
#include "control/variants.h"

#define VR_REG_NAME_MAX 48 /* model / app names (profile fields hold 64) */

typedef struct vr_register_req {
  const char *app;         /* required */
  const char *model_path;  /* ONNX file, required */
  const char *name;        /* NULL: file name without ".onnx" */
  const char *repo_dir;    /* required: where the model is copied */
  const char *val_inputs;  /* .npy; with val_labels, or neither */
  const char *val_labels;
  const char *calibration; /* .npy for int8; NULL: first validation rows */
  double declared_accuracy; /* percent; < 0: none */
  vr_gen_opts gen;         /* max_threads 0 = online cores */
  vr_prof_opts prof;
  double core_price_per_hour; /* cost model; 0 = 0.0425 (cloud vCPU-hour) */
  int quiet;               /* no progress lines on stderr */
} vr_register_req;

typedef struct vr_register_result {
  char name[VR_REG_NAME_MAX + 1]; /* the registered model's name */
  int n_variants;
  double accuracy_pct[3]; /* per vr_precision; < 0 when not generated */
  double seconds;         /* wall time of the whole registration */
} vr_register_result;

void vr_register_req_init(vr_register_req *r);
int vr_register(vr_store *s, const vr_register_req *r, vr_register_result *res,
                vr_errbuf *err);
/* Removes a model from the store and deletes its repository entry. */
int vr_unregister(vr_store *s, const char *name, vr_errbuf *err);
/* Names are 1..48 characters of [A-Za-z0-9_.-], not starting with '.'. */
int vr_name_valid(const char *name);

#endif
