/* registry_etcd.c - the etcd backend (DESIGN.md section 5b).
 * Not built yet: --backend etcd fails clearly instead of pretending. */
#include "backend.h"

int etcd_registry_open(struct registry *reg, const struct registry_config *cfg,
		       struct wsl_error *err)
{
	(void)reg;
	(void)cfg;
	return wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
			     "this wslock was built without the etcd backend");
}
