#include "vario/dtype.h"

#include <string.h>

static const struct {
  vr_dtype dt;
  size_t size;
  const char *kserve, *name;
} k_types[] = {
    {VR_DT_F32, 4, "FP32", "float32"},   {VR_DT_U8, 1, "UINT8", "uint8"},
    {VR_DT_I8, 1, "INT8", "int8"},       {VR_DT_U16, 2, "UINT16", "uint16"},
    {VR_DT_I16, 2, "INT16", "int16"},    {VR_DT_I32, 4, "INT32", "int32"},
    {VR_DT_I64, 8, "INT64", "int64"},    {VR_DT_BOOL, 1, "BOOL", "bool"},
    {VR_DT_F16, 2, "FP16", "float16"},   {VR_DT_F64, 8, "FP64", "float64"},
    {VR_DT_U32, 4, "UINT32", "uint32"},  {VR_DT_U64, 8, "UINT64", "uint64"},
    {VR_DT_BF16, 2, "BF16", "bfloat16"},
};
#define NTYPES (sizeof k_types / sizeof k_types[0])

size_t vr_dtype_size(vr_dtype dt) {
  for (size_t i = 0; i < NTYPES; i++)
    if (k_types[i].dt == dt) return k_types[i].size;
  return 0;
}

const char *vr_dtype_kserve(vr_dtype dt) {
  for (size_t i = 0; i < NTYPES; i++)
    if (k_types[i].dt == dt) return k_types[i].kserve;
  return NULL;
}

vr_dtype vr_dtype_from_kserve(const char *name) {
  for (size_t i = 0; name && i < NTYPES; i++)
    if (strcmp(k_types[i].kserve, name) == 0) return k_types[i].dt;
  return VR_DT_UNDEFINED;
}

const char *vr_dtype_name(vr_dtype dt) {
  for (size_t i = 0; i < NTYPES; i++)
    if (k_types[i].dt == dt) return k_types[i].name;
  return "undefined";
}
