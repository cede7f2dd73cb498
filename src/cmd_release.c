/* cmd_release.c - wslock release --token T WORKSPACE: release a lock taken
 * by acquire, only when T is its owner's token. */
#include "cli.h"
#include "output.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const struct cli_option release_options[] = {
	{ "token", OPT_TOKEN, required_argument, "TOKEN",
	  "the owner's token (from acquire's owner document); required" },
	CLI_OPT_END
};

static int release_option(int id, const char *arg, void *ctx, struct wsl_error *err)
{
	const char **token = ctx;

	if (id != OPT_TOKEN)
		return wsl_error_set(err, WSL_USAGE, "unexpected option");
	if (strlen(arg) != WSL_TOKEN_HEX)
		return wsl_error_set(err, WSL_USAGE,
				     "--token takes the 32 hex digits of an owner's token");
	if (!crypto_hex_valid(arg, WSL_TOKEN_HEX))
		return wsl_error_set(err, WSL_USAGE,
				     "--token takes the 32 lowercase hex digits of an owner's token");
	*token = arg;
	return 0;
}

static int release_main(struct cli *c, int argc, char **argv)
{
	char ws[PATH_MAX];
	struct wsl_error err = { 0 };
	const char *token = NULL;
	struct registry reg;
	struct owner o;
	int first, status = 0;
	json_t *out;

	c->json_errors = true;
	first = cli_parse(c, &cmd_release, argc, argv, release_option, &token, &status);
	if (first < 0)
		return status;
	if (argc - first != 1)
		return output_usage(c, argc - first == 0 ? "release needs a WORKSPACE" :
				 "release takes one WORKSPACE");
	if (token == NULL)
		return output_usage(c, "release needs --token TOKEN");
	/* A workspace deleted while locked can still be released by path. */
	ws[0] = '\0';
	if (registry_open_for(&reg, &c->reg_cfg, argv[first], true, true, ws, &err) != 0)
		return output_error(c, &err);
	if (registry_release(&reg, ws, token, &o, &err) != 0) {
		wsl_error_detail(&err.workspace_root, ws[0] == '/' ? ws : NULL);
		registry_close(&reg);
		status = output_error(c, &err);
		wsl_error_clear(&err);
		return status;
	}
	registry_close(&reg);
	if (c->verbose)
		fprintf(stderr, "wslock: released %s\n", ws);
	out = json_object();
	json_object_set_new(out, "action", json_string("released"));
	json_object_set_new(out, "workspace_root", json_string(ws));
	json_object_set_new(out, "owner", owner_to_json(&o));
	return output_json(c, out);
}

const struct cli_command cmd_release = {
	"release", release_main, "--token TOKEN WORKSPACE",
	"Release the lock on WORKSPACE taken by 'wslock acquire', if TOKEN is its owner's.",
	release_options,
	"A lock held by another owner (taken over by recover) is never touched:\n"
	"release then fails with WSLOCK_OWNERSHIP_LOST (78).\n",
};
