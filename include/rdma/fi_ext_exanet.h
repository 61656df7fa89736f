/*
 * exanet provider extensions for libfabric applications.
 *
 * Selecting the provider needs nothing from this header: set FI_PROVIDER=exanet (and
 * FI_PROVIDER_PATH when the module is not installed). The header names the provider and its
 * address format for applications that want to recognise exanet addresses.
 */
#ifndef FI_EXT_EXANET_H
#define FI_EXT_EXANET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FI_EXANET_PROV_NAME "exanet"
#define FI_EXANET_FABRIC_NAME "exanet"
#define FI_EXANET_DOMAIN_NAME "exanet0"

/* An endpoint name as returned by fi_getname (addr_format FI_FORMAT_UNSPEC, 16 bytes). */
struct fi_exanet_addr {
	uint32_t magic;   /* FI_EXANET_ADDR_MAGIC */
	uint16_t node;    /* node id */
	uint16_t version; /* 1 */
	uint32_t pdid;    /* protection domain */
	uint32_t port;    /* mailbox on the node */
};

#define FI_EXANET_ADDR_MAGIC 0x584e5445u

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_EXANET_H */
