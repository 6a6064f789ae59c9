/* <stdint.h> for device code compiled by NVRTC, which has no C library
 * headers. Only on NVRTC's include path (the registry passes this folder);
 * the widths are those of the LP64 host ABI, so a kernel parameter declared
 * int64_t on the device side matches the host launcher's int64_t. */
#ifndef KREG_NVRTC_STDINT_H_
#define KREG_NVRTC_STDINT_H_

typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
typedef long intptr_t;
typedef unsigned long uintptr_t;
typedef long intmax_t;
typedef unsigned long uintmax_t;

#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807L
#define UINT32_MAX 4294967295U

#endif /* KREG_NVRTC_STDINT_H_ */
