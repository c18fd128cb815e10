/*
 * Tensor element types. The numeric values are ONNX's TensorProto.DataType
 * codes, so ONNX files map without a table.
 */
#ifndef VARIO_DTYPE_H
#define VARIO_DTYPE_H

#include <stddef.h>

typedef enum vr_dtype {
  VR_DT_UNDEFINED = 0,
  VR_DT_F32 = 1,
  VR_DT_U8 = 2,
  VR_DT_I8 = 3,
  VR_DT_U16 = 4,
  VR_DT_I16 = 5,
  VR_DT_I32 = 6,
  VR_DT_I64 = 7,
  VR_DT_BOOL = 9,
  VR_DT_F16 = 10,
  VR_DT_F64 = 11,
  VR_DT_U32 = 12,
  VR_DT_U64 = 13,
  VR_DT_BF16 = 16,
} vr_dtype;

/* Element size in bytes; 0 for an unknown type. */
size_t vr_dtype_size(vr_dtype dt);
/* KServe v2 datatype name ("FP32", "INT64", "BOOL", ...) or NULL. */
const char *vr_dtype_kserve(vr_dtype dt);
/* Parses a KServe v2 datatype name; VR_DT_UNDEFINED if unknown. */
vr_dtype vr_dtype_from_kserve(const char *name);
/* Short lower-case name ("float32", "int64") for messages. */
const char *vr_dtype_name(vr_dtype dt);

#endif
