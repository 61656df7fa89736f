/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libfabric hides a provider that fails to load, so load it ourselves: dlopen(RTLD_NOW) resolves
 * every symbol now, the module exports fi_prov_ini, and the tools a user runs list exanet
 * (fi_info -p exanet) and its parameters (fi_info -e).
 */
#include "xt.h"

#include <dlfcn.h>
#include <string.h>

static int command_prints(const char *cmd, const char *needle)
{
	FILE *p = popen(cmd, "r");
	XT_CHECK(p, "popen %s", cmd);
	char line[512];
	int found = 0;
	while (fgets(line, sizeof line, p))
		if (strstr(line, needle))
			found = 1;
	int rc = pclose(p);
	XT_CHECK(rc == 0, "%s exited with %d", cmd, rc);
	return found;
}

int main(void)
{
	xt_init(60);
	const char *dir = getenv("FI_PROVIDER_PATH");
	XT_CHECK(dir && *dir, "FI_PROVIDER_PATH must name the build's lib directory");
	char path[1024];
	snprintf(path, sizeof path, "%s/libexanet-fi.so", dir);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	XT_CHECK(h, "dlopen(%s, RTLD_NOW): %s", path, dlerror());
	XT_CHECK(dlsym(h, "fi_prov_ini"), "fi_prov_ini not exported");
	dlclose(h);
	xt_pass("module loads with RTLD_NOW and exports fi_prov_ini");

	struct fi_info *info = NULL;
	XT_RC(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &info));
	int found = 0;
	for (struct fi_info *i = info; i; i = i->next)
		if (i->fabric_attr->prov_name && strcmp(i->fabric_attr->prov_name, "exanet") == 0)
			found = 1;
	fi_freeinfo(info);
	XT_CHECK(found, "fi_getinfo(NULL hints) does not list a provider named exactly \"exanet\"");
	xt_pass("fi_getinfo with NULL hints lists exanet");

	XT_CHECK(command_prints("fi_info -p exanet 2>/dev/null", "provider: exanet"), "fi_info -p exanet");
	XT_CHECK(command_prints("fi_info -e 2>/dev/null", "FI_EXANET_MEDIUM_MAX"), "fi_info -e parameters");
	XT_CHECK(command_prints("fi_info -e 2>/dev/null", "FI_EXANET_PDID"), "fi_info -e pdid");
	xt_pass("fi_info lists the provider and its parameters");
	return 0;
}
