/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The counts kept by fi_count.so, an LD_PRELOAD library that counts the libfabric data-path calls
 * a program makes (see fi_count.c). A program reads them with
 *     int (*snap)(struct fi_count *) = dlsym(RTLD_DEFAULT, FI_COUNT_SNAPSHOT);
 * which is NULL when the library is not loaded.
 */
#ifndef EXANET_FI_COUNT_H
#define EXANET_FI_COUNT_H

#include <stdint.h>

#define FI_COUNT_SNAPSHOT "exanet_fi_count_snapshot"

struct fi_count {
	uint64_t send;         /* fi_tsend/tsendv/tsendmsg/tsenddata and the fi_send family */
	uint64_t inject;       /* fi_tinject/tinjectdata and fi_inject/injectdata */
	uint64_t recv;         /* fi_trecv/trecvv/trecvmsg and the fi_recv family */
	uint64_t post_again;   /* posting calls (the three above) that returned -FI_EAGAIN */
	uint64_t read_full;    /* fi_cq_read/readfrom calls that returned entries */
	uint64_t read_empty;   /* ... that returned -FI_EAGAIN (polls: depend on timing) */
	uint64_t read_other;   /* ... that returned anything else (-FI_EAVAIL, errors) */
	uint64_t entries;      /* completion entries returned by those reads */
	uint64_t readerr;      /* fi_cq_readerr calls */
	uint64_t other;        /* every other wrapped call: cancel, sread, probes (FI_PEEK) ... */
};

#endif
