/* Common includes for cmocka unit tests. */
#ifndef VR_TEST_H
#define VR_TEST_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#endif
