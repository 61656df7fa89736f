/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The fi_getinfo contract (libfabric-anchors.md §1.6): capabilities echoed without extra primary
 * ones, threading/progress/AV type echoed, no mode or memory-registration bits demanded, the
 * exact hints of Open MPI, MPICH and fi_pingpong accepted, addresses from node/service, and
 * -FI_ENODATA for what exanet does not offer.
 */
#include "xt.h"

#include <stdlib.h>

#include <string.h>

static struct fi_info *base(void)
{
	struct fi_info *h = fi_allocinfo();
	h->fabric_attr->prov_name = strdup("exanet");
	h->ep_attr->type = FI_EP_RDM;
	return h;
}

static int query(struct fi_info *h, const char *node, const char *service, uint64_t flags,
		 uint32_t version, struct fi_info **out)
{
	struct fi_info *info = NULL;
	int rc = fi_getinfo(version ? version : FI_VERSION(1, 17), node, service, flags, h, &info);
	if (out)
		*out = info;
	else
		fi_freeinfo(info);
	return rc;
}

static const uint64_t primaries[] = {FI_MSG,  FI_TAGGED, FI_SEND,        FI_RECV,        FI_DIRECTED_RECV,
				     FI_RMA,  FI_READ,   FI_WRITE,       FI_REMOTE_READ, FI_REMOTE_WRITE,
				     FI_ATOMIC};
#define NPRIMARIES (sizeof primaries / sizeof primaries[0])
static const uint64_t all_primary = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST | FI_COLLECTIVE |
				    FI_READ | FI_WRITE | FI_RECV | FI_SEND | FI_REMOTE_READ | FI_REMOTE_WRITE |
				    FI_NAMED_RX_CTX | FI_DIRECTED_RECV | FI_HMEM | FI_VARIABLE_MSG;

int main(void)
{
	xt_init(60);
	struct fi_info *info, *h;

	XT_RC(query(NULL, NULL, NULL, 0, 0, &info));
	XT_CHECK(info, "NULL hints");
	fi_freeinfo(info);

	/* every combination of primary capabilities comes back exactly */
	for (unsigned mask = 1; mask < (1u << NPRIMARIES); mask++) {
		h = base();
		for (unsigned b = 0; b < NPRIMARIES; b++)
			if (mask & (1u << b))
				h->caps |= primaries[b];
		XT_RC(query(h, NULL, NULL, 0, 0, &info));
		XT_CHECK((info->caps & all_primary) == h->caps, "caps 0x%llx came back 0x%llx",
			 (unsigned long long)h->caps, (unsigned long long)info->caps);
		fi_freeinfo(info);
		fi_freeinfo(h);
	}
	xt_pass("primary caps echoed without extras");

	/* FI_ATOMIC: offered on both sides with the atomic orders exanet keeps, and not returned to
	 * hints that do not ask for it */
	h = base();
	h->caps = FI_TAGGED | FI_ATOMIC;
	h->tx_attr->msg_order = FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR |
				FI_ORDER_ATOMIC_WAW;
	XT_RC(query(h, NULL, NULL, 0, 0, &info));
	XT_CHECK((info->tx_attr->caps & FI_ATOMIC) && (info->rx_attr->caps & FI_ATOMIC) &&
			 (info->tx_attr->msg_order & FI_ORDER_ATOMIC_WAW) &&
			 info->ep_attr->max_order_waw_size > 0,
		 "FI_ATOMIC attributes: tx caps 0x%llx, msg_order 0x%llx, max_order_waw_size %zu",
		 (unsigned long long)info->tx_attr->caps, (unsigned long long)info->tx_attr->msg_order,
		 info->ep_attr->max_order_waw_size);
	fi_freeinfo(info);
	h->tx_attr->msg_order = FI_ORDER_RMA_WAW; /* RMA is not ordered among itself */
	XT_CHECK(query(h, NULL, NULL, 0, 0, NULL) == -FI_ENODATA, "FI_ORDER_RMA_WAW must be refused");
	fi_freeinfo(h);
	h = base();
	h->caps = FI_TAGGED | FI_RMA;
	XT_RC(query(h, NULL, NULL, 0, 0, &info));
	XT_CHECK(!(info->caps & FI_ATOMIC) && !(info->tx_attr->caps & FI_ATOMIC), "FI_ATOMIC not asked for");
	fi_freeinfo(info);
	/* sends after writes (write_then_send checks that it holds) */
	h->tx_attr->msg_order = h->rx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_SAW;
	XT_RC(query(h, NULL, NULL, 0, 0, &info));
	XT_CHECK(info->tx_attr->msg_order & FI_ORDER_SAW, "FI_ORDER_SAW asked for");
	fi_freeinfo(info);
	fi_freeinfo(h);
	xt_pass("FI_ATOMIC offered when asked for, with its orders; FI_ORDER_SAW");

	/* not offered: -FI_ENODATA */
	const uint64_t absent[] = {FI_FENCE, FI_NAMED_RX_CTX, FI_TRIGGER};
	for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
		h = base();
		h->caps = FI_TAGGED | absent[i];
		XT_CHECK(query(h, NULL, NULL, 0, 0, NULL) == -FI_ENODATA, "cap 0x%llx must be refused",
			 (unsigned long long)absent[i]);
		fi_freeinfo(h);
	}
	const enum fi_ep_type types[] = {FI_EP_MSG, FI_EP_DGRAM};
	for (int i = 0; i < 2; i++) {
		h = base();
		h->ep_attr->type = types[i];
		XT_CHECK(query(h, NULL, NULL, 0, 0, NULL) == -FI_ENODATA, "ep type %d must be refused", types[i]);
		fi_freeinfo(h);
	}
	h = base();
	h->domain_attr->name = strdup("invalid_domain");
	XT_CHECK(query(h, NULL, NULL, 0, 0, NULL) == -FI_ENODATA, "unknown domain name");
	fi_freeinfo(h);
	h = base();
	h->fabric_attr->name = strdup("invalid_fabric");
	XT_CHECK(query(h, NULL, NULL, 0, 0, NULL) == -FI_ENODATA, "unknown fabric name");
	fi_freeinfo(h);
	XT_CHECK(query(NULL, "g00n13s", "9228", 0, 0, NULL) == -FI_ENODATA, "unknown node");
	h = base();
	h->domain_attr->data_progress = (enum fi_progress)77;
	XT_CHECK(query(h, NULL, NULL, 0, 0, NULL) == -FI_ENODATA, "unknown progress model");
	fi_freeinfo(h);
	xt_pass("unsupported requests get -FI_ENODATA");

	/* echoes */
	const enum fi_threading levels[] = {FI_THREAD_SAFE, FI_THREAD_FID, FI_THREAD_DOMAIN,
					    FI_THREAD_COMPLETION, FI_THREAD_ENDPOINT};
	for (int i = 0; i < 5; i++) {
		h = base();
		h->domain_attr->threading = levels[i];
		XT_RC(query(h, NULL, NULL, 0, 0, &info));
		XT_CHECK(info->domain_attr->threading == levels[i], "threading %d echoed as %d", levels[i],
			 info->domain_attr->threading);
		fi_freeinfo(info);
		fi_freeinfo(h);
	}
	const enum fi_av_type avs[] = {FI_AV_MAP, FI_AV_TABLE};
	for (int i = 0; i < 2; i++) {
		h = base();
		h->domain_attr->av_type = avs[i];
		h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
		XT_RC(query(h, NULL, NULL, 0, 0, &info));
		XT_CHECK(info->domain_attr->av_type == avs[i], "av_type echoed");
		XT_CHECK(info->domain_attr->data_progress == FI_PROGRESS_MANUAL, "progress echoed");
		fi_freeinfo(info);
		fi_freeinfo(h);
	}
	/* progress: each field echoed as asked; unset means manual (FI_EXANET_PROGRESS unset) */
	const enum fi_progress models[] = {FI_PROGRESS_UNSPEC, FI_PROGRESS_MANUAL, FI_PROGRESS_AUTO};
	for (int c = 0; c < 3; c++)
		for (int d = 0; d < 3; d++) {
			h = base();
			h->domain_attr->control_progress = models[c];
			h->domain_attr->data_progress = models[d];
			XT_RC(query(h, NULL, NULL, 0, 0, &info));
			const enum fi_progress want_c = models[c] ? models[c] : FI_PROGRESS_MANUAL;
			const enum fi_progress want_d = models[d] ? models[d] : FI_PROGRESS_MANUAL;
			XT_CHECK(info->domain_attr->control_progress == want_c &&
					 info->domain_attr->data_progress == want_d,
				 "progress hints %d/%d answered %d/%d", models[c], models[d],
				 info->domain_attr->control_progress, info->domain_attr->data_progress);
			fi_freeinfo(info);
			fi_freeinfo(h);
		}
	h = base();
	h->mode = ~0ULL;
	h->domain_attr->mr_mode = 0;
	XT_RC(query(h, NULL, NULL, 0, 0, &info));
	XT_CHECK(info->mode == 0 && info->domain_attr->mr_mode == 0, "mode/mr_mode demanded: 0x%llx / 0x%x",
		 (unsigned long long)info->mode, info->domain_attr->mr_mode);
	fi_freeinfo(info);
	fi_freeinfo(h);
	h = base();
	h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	XT_RC(query(h, NULL, NULL, 0, 0, &info));
	XT_CHECK(info->tx_attr->op_flags == FI_DELIVERY_COMPLETE, "tx op_flags echoed");
	fi_freeinfo(info);
	fi_freeinfo(h);
	xt_pass("threading, AV type, progress, op_flags echoed; no mode or mr_mode demanded");

	/* Open MPI 4.1 mtl/ofi */
	h = base();
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
	h->tx_attr->msg_order = h->rx_attr->msg_order = FI_ORDER_SAS;
	h->tx_attr->op_flags = h->rx_attr->op_flags = FI_COMPLETION;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->cq_data_size = 4;
	h->domain_attr->av_type = FI_AV_MAP;
	h->domain_attr->resource_mgmt = FI_RM_ENABLED;
	h->domain_attr->mr_mode = 0;
	XT_RC(query(h, NULL, NULL, 0, FI_VERSION(1, 5), &info));
	XT_CHECK((info->caps & FI_DIRECTED_RECV) && info->domain_attr->cq_data_size >= 4 &&
		 (info->ep_attr->mem_tag_format >> 63) && info->fabric_attr->name &&
		 info->tx_attr->inject_size > 0 && info->ep_attr->max_msg_size > (1ULL << 40),
		 "Open MPI hints: answer unusable by the mtl");
	fi_freeinfo(info);
	fi_freeinfo(h);
	/* MPICH ch4:ofi-like: FI_THREAD_DOMAIN must come back exactly */
	h = base();
	h->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
	h->mode = FI_CONTEXT;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->domain_attr->av_type = FI_AV_TABLE;
	h->tx_attr->op_flags = FI_DELIVERY_COMPLETE | FI_COMPLETION;
	XT_RC(query(h, NULL, NULL, 0, FI_VERSION(1, 7), &info));
	XT_CHECK(info->domain_attr->threading == FI_THREAD_DOMAIN, "MPICH threading");
	XT_CHECK(info->domain_attr->mr_mode == 0,
		 "MPICH mr_mode: exanet demands none of the offered restrictions, 0x%x", info->domain_attr->mr_mode);
	fi_freeinfo(info);
	fi_freeinfo(h);
	/* fi_pingpong */
	h = base();
	h->caps = FI_MSG;
	h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	XT_RC(query(h, NULL, NULL, 0, fi_version(), &info));
	XT_CHECK(!(info->mode & FI_MSG_PREFIX), "no message prefix demanded");
	XT_CHECK(!(info->domain_attr->mr_mode & FI_MR_LOCAL) &&
		 !(info->domain_attr->mr_mode & ~(FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR)),
		 "no local registration demanded; nothing beyond the offer (0x%x)", info->domain_attr->mr_mode);
	fi_freeinfo(info);
	fi_freeinfo(h);
	/* RMA: the whole set, secondary FI_RMA_EVENT, and an RMA iov limit */
	h = base();
	h->caps = FI_RMA | FI_RMA_EVENT;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ENDPOINT | FI_MR_RAW;
	XT_RC(query(h, NULL, NULL, 0, FI_VERSION(1, 17), &info));
	XT_CHECK((info->caps & (FI_RMA | FI_RMA_EVENT)) == (FI_RMA | FI_RMA_EVENT) && info->tx_attr->rma_iov_limit >= 1 &&
		 info->domain_attr->mr_mode == 0 &&
		 info->domain_attr->mr_iov_limit >= 1,
		 "RMA info: caps 0x%llx mr_mode 0x%x", (unsigned long long)info->caps, info->domain_attr->mr_mode);
	fi_freeinfo(info);
	/* API 1.4: the old names */
	h->domain_attr->mr_mode = FI_MR_BASIC;
	XT_RC(query(h, NULL, NULL, 0, FI_VERSION(1, 4), &info));
	XT_CHECK(info->domain_attr->mr_mode == FI_MR_BASIC, "FI_MR_BASIC echoed");
	fi_freeinfo(info);
	fi_freeinfo(h);
	xt_pass("Open MPI, MPICH, fi_pingpong and RMA hints");

	/* a misspelt protocol variant is refused rather than run as the default */
	setenv("FI_EXANET_PROTOCOL", "optimsitic", 1);
	XT_CHECK(query(NULL, NULL, NULL, 0, 0, NULL) == -FI_ENODATA, "unknown FI_EXANET_PROTOCOL accepted");
	setenv("FI_EXANET_PROTOCOL", "optimistic", 1);
	XT_RC(query(NULL, NULL, NULL, 0, 0, NULL));
	setenv("FI_EXANET_PROTOCOL", "read", 1);
	XT_RC(query(NULL, NULL, NULL, 0, 0, NULL));
	unsetenv("FI_EXANET_PROTOCOL");
	xt_pass("FI_EXANET_PROTOCOL: write, read and optimistic accepted; a misspelt name refused");

	/* FI_EXANET_PROGRESS fills unset progress fields; a hint that names one still wins */
	setenv("FI_EXANET_PROGRESS", "auto", 1);
	XT_RC(query(NULL, NULL, NULL, 0, 0, &info));
	XT_CHECK(info->domain_attr->control_progress == FI_PROGRESS_AUTO &&
			 info->domain_attr->data_progress == FI_PROGRESS_AUTO,
		 "FI_EXANET_PROGRESS=auto answered %d/%d", info->domain_attr->control_progress,
		 info->domain_attr->data_progress);
	fi_freeinfo(info);
	h = base();
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	XT_RC(query(h, NULL, NULL, 0, 0, &info));
	XT_CHECK(info->domain_attr->data_progress == FI_PROGRESS_MANUAL, "manual hint overridden");
	fi_freeinfo(info);
	fi_freeinfo(h);
	setenv("FI_EXANET_PROGRESS", "automatic", 1); /* misspelt: manual, with a warning */
	XT_RC(query(NULL, NULL, NULL, 0, 0, &info));
	XT_CHECK(info->domain_attr->data_progress == FI_PROGRESS_MANUAL, "misspelt FI_EXANET_PROGRESS");
	fi_freeinfo(info);
	unsetenv("FI_EXANET_PROGRESS");
	xt_pass("FI_EXANET_PROGRESS: auto fills unset progress, hints win, a misspelt value is manual");

	/* each side's attributes carry only its own capabilities (fi_getinfo(3), CAPABILITIES) */
	const uint64_t rx_only = FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV | FI_SOURCE |
				 FI_DIRECTED_RECV | FI_RMA_EVENT;
	const uint64_t tx_only = FI_SEND | FI_READ | FI_WRITE;
	XT_RC(query(NULL, NULL, NULL, 0, 0, &info));
	XT_CHECK(!(info->tx_attr->caps & rx_only) && !(info->rx_attr->caps & tx_only) &&
		 (info->tx_attr->caps & FI_SEND) && (info->rx_attr->caps & FI_RECV),
		 "tx caps 0x%llx, rx caps 0x%llx", (unsigned long long)info->tx_attr->caps,
		 (unsigned long long)info->rx_attr->caps);
	fi_freeinfo(info);
	/* queue sizes: what it cannot honour is refused, what it can comes back at least as asked */
	h = base();
	h->tx_attr->size = (size_t)1 << 30;
	XT_CHECK(query(h, NULL, NULL, 0, 0, NULL) == -FI_ENODATA, "tx size 2^30 granted");
	h->tx_attr->size = 0;
	h->rx_attr->size = (size_t)1 << 30;
	XT_CHECK(query(h, NULL, NULL, 0, 0, NULL) == -FI_ENODATA, "rx size 2^30 granted");
	h->rx_attr->size = 8192;
	h->tx_attr->size = 16;
	XT_RC(query(h, NULL, NULL, 0, 0, &info));
	XT_CHECK(info->rx_attr->size >= 8192 && info->tx_attr->size >= 16, "sizes %zu %zu", info->tx_attr->size,
		 info->rx_attr->size);
	fi_freeinfo(info);
	fi_freeinfo(h);
	xt_pass("tx and rx attributes carry their own caps; sizes refused above what exanet honours");

	/* addresses */
	const char *nodes[] = {"localhost", "127.0.0.1", NULL};
	for (int i = 0; i < 3; i++) {
		XT_RC(query(NULL, nodes[i], "9228", FI_SOURCE, 0, &info));
		XT_CHECK(info->src_addr && info->src_addrlen > 0 && info->src_addrlen <= 64, "FI_SOURCE src_addr");
		fi_freeinfo(info);
		XT_RC(query(NULL, nodes[i], "9228", 0, 0, &info));
		XT_CHECK(info->src_addr && info->dest_addr, "node/service gives src and dest");
		fi_freeinfo(info);
	}
	XT_RC(query(NULL, NULL, NULL, 0, 0, &info));
	XT_CHECK(info->src_addr, "every info has a src_addr");
	/* a real endpoint's name fed back as dest_addr */
	struct xt_ep x;
	struct fi_info *xh = xt_hints();
	xt_open(&x, xh, 0);
	fi_freeinfo(xh);
	h = base();
	h->addr_format = info->addr_format;
	h->dest_addr = malloc(x.namelen);
	memcpy(h->dest_addr, x.name, x.namelen);
	h->dest_addrlen = x.namelen;
	struct fi_info *with_dest;
	XT_RC(query(h, NULL, NULL, 0, 0, &with_dest));
	XT_CHECK(with_dest->dest_addrlen == x.namelen && !memcmp(with_dest->dest_addr, x.name, x.namelen),
		 "dest_addr from the hints");
	fi_freeinfo(with_dest);
	h->dest_addrlen = 3; /* garbage */
	XT_CHECK(query(h, NULL, NULL, 0, 0, NULL) == -FI_ENODATA, "a malformed dest_addr");
	fi_freeinfo(h);
	fi_freeinfo(info);
	xt_close(&x);
	xt_pass("addresses from node/service and from hints");
	return 0;
}
