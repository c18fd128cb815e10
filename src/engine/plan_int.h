/* Internals shared by the plan builder (plan.c) and op lowerings
 * (lower.c, lower_nn.c). Not part of any public API. */
#ifndef VR_ENGINE_PLAN_INT_H
#define VR_ENGINE_PLAN_INT_H

#include "engine/ops.h"
#include "engine/plan.h"

/* A tensor inside a plan: one layout (md) of one graph value or a temporary
 * (a reordered copy). Storage is an arena offset of its alias root or
 * external memory (constants, cached weights). */
struct vr_pval {
  vr_tview t;            /* plain dtype/shape; data set by bind */
  int has_md;            /* dtype representable in oneDNN */
  dnnl_memory_desc_t md; /* actual layout */
  int val;               /* graph value, or -1 */
  size_t bytes;
  int64_t off;           /* arena offset of the root; -1 = external */
  void *ext;             /* external storage */
  int root;              /* alias root (itself when it owns storage) */
  int def, last;         /* first writing / last reading step */
  int pinned;            /* live until the end of the run (outputs) */
  int plain;             /* plain-layout copy, or -1 */
  dnnl_memory_t mem;
};

enum { VR_STEP_PRIM = 1, VR_STEP_REF = 2 };
#define VR_STEP_MAX_ARGS 16

typedef struct vr_arg {
  int arg; /* DNNL_ARG_* */
  int pv;
} vr_arg;

struct vr_step {
  int kind;
  int node;  /* graph node index, or -1 for reorders/copies */
  dnnl_primitive_t prim;
  int nargs;
  vr_arg args[VR_STEP_MAX_ARGS];
  dnnl_exec_arg_t ex[VR_STEP_MAX_ARGS];
  /* REF */
  int nin, nout;
  int *ipv, *opv;
  vr_tview *iv, *ov;
};

/* Plan-building state. */
typedef struct vr_pb {
  const vr_plan_ctx *c;
  const vr_graph *g;
  vr_plan *p;
  vr_tview *vt;   /* graph value shapes at this batch */
  int *val2pv;    /* current plan value of each graph value, or -1 */
  int *uses;      /* last node reading each value's storage (see plan.c) */
  vr_errbuf *err;
  int no_q8;      /* lower the current node without int8 */
} vr_pb;

int vr_pb_new_pv(vr_pb *b, const vr_tview *t, const dnnl_memory_desc_t *md);
/* Plan value for graph value v (constants become external plain values). */
int vr_pb_pv_of(vr_pb *b, int v);
/* A plain-layout version of pv (reorder inserted once, then cached). */
int vr_pb_plain(vr_pb *b, int pv);
/* pv in exactly layout md (a reorder step when it differs). */
int vr_pb_as(vr_pb *b, int pv, const dnnl_memory_desc_t *md);
/* pv converted to md (an int8 type) with values multiplied by scale. */
int vr_pb_quantize(vr_pb *b, int pv, const dnnl_memory_desc_t *md, float scale);
/* Output value: a new plan value for graph value v with layout md. */
int vr_pb_def(vr_pb *b, int v, const dnnl_memory_desc_t *md);
/* Same, sharing storage with pv `alias` (in-place or pure reshape). */
int vr_pb_def_alias(vr_pb *b, int v, const dnnl_memory_desc_t *md, int alias);
/* Adds a primitive step (takes ownership of pd, which is destroyed). */
int vr_pb_prim(vr_pb *b, int node, dnnl_primitive_desc_t pd, const vr_arg *args,
               int nargs);
/* A reference-kernel step for node ni on plain inputs. */
int vr_pb_ref(vr_pb *b, int ni);
/* Reordered constant weights in layout want (session cache). */
int vr_pb_weights(vr_pb *b, int v, const dnnl_memory_desc_t *src,
                  const dnnl_memory_desc_t *want, const dnnl_primitive_attr_t attr,
                  void **out);
/* An owned plan buffer (freed with the plan). */
void *vr_pb_alloc(vr_pb *b, size_t bytes);

void vr_md_plain(dnnl_memory_desc_t *md, const vr_tview *t);
int vr_md_is_plain(const dnnl_memory_desc_t *md, const vr_tview *t);
dnnl_data_type_t vr_dnnl_dt(vr_dtype dt);
int vr_dnnl_err(vr_errbuf *err, const vr_node *n, dnnl_status_t s, const char *what);

/* Lowers node ni; returns 0, or 1 when the node has no oneDNN lowering
 * (the caller then uses the reference kernel), or <0. */
int vr_lower_node(vr_pb *b, int ni);

#endif
