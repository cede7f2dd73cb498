/* test_lockrules.c - the lock rules decide once: the conflict ranking, the
 * conflicts waiting cannot cure, and reclaim's preview asking the same
 * take-over check as reclaim --yes. */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "lockrules.h"
#include "tap.h"

#define TOKEN "0123456789abcdef0123456789abcdef"

static void entry(struct lock_entry *e, enum lock_state state, enum liveness l)
{
	memset(e, 0, sizeof(*e));
	e->state = state;
	snprintf(e->workspace_root, sizeof(e->workspace_root), "/w/a");
	snprintf(e->lock_path, sizeof(e->lock_path), "/r/locks/k/owner.json");
	if (state == LOCK_CORRUPT) {
		snprintf(e->problem, sizeof(e->problem), "not JSON");
		return;
	}
	e->has_owner = true;
	snprintf(e->owner.token, sizeof(e->owner.token), TOKEN);
	snprintf(e->owner.workspace_root, sizeof(e->owner.workspace_root), "/w/a");
	e->probed = true;
	e->liveness = l;
	snprintf(e->reason, sizeof(e->reason), "because");
}

/* The preview and --yes: the same verdict for every kind of lock. */
static void test_reclaim_agrees(void)
{
	static const struct {
		enum lock_state state;
		enum liveness l;
		bool force, want;
	} cases[] = {
		{ LOCK_HELD, LIVENESS_DEAD, false, true },
		{ LOCK_HELD, LIVENESS_DEAD, true, true },
		{ LOCK_HELD, LIVENESS_UNKNOWN, false, false },
		{ LOCK_HELD, LIVENESS_UNKNOWN, true, true },
		{ LOCK_HELD, LIVENESS_LIVE, false, false },
		{ LOCK_HELD, LIVENESS_LIVE, true, false },
		{ LOCK_RETAINED, LIVENESS_DEAD, false, false },
		{ LOCK_RETAINED, LIVENESS_DEAD, true, false },
		{ LOCK_CORRUPT, LIVENESS_DEAD, true, false },
		{ LOCK_FREE, LIVENESS_DEAD, false, false },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct registry_expect x = { 0 };
		struct wsl_error err = { 0 };
		struct lock_entry e;
		char why[1200], name[160];
		bool preview, yes;

		entry(&e, cases[i].state, cases[i].l);
		preview = lockrules_reclaimable(&e, cases[i].force, why, sizeof(why));
		x.owner = e.has_owner ? &e.owner : NULL;
		x.force = cases[i].force;
		yes = lockrules_check_take_over(e.workspace_root, &x, &e, &err) == 0;
		snprintf(name, sizeof(name), "reclaim %s/%s%s: preview says %s, as --yes decides",
			 lock_state_name(cases[i].state), liveness_name(cases[i].l),
			 cases[i].force ? " --force" : "", preview ? "reclaimable" : "kept");
		CHECK(preview == yes && preview == cases[i].want && why[0] != '\0', name);
		wsl_error_clear(&err);
	}
}

static void test_conflicts(void)
{
	struct lock_entry best, cand;
	struct wsl_error err = { 0 };

	entry(&best, LOCK_HELD, LIVENESS_LIVE);
	entry(&cand, LOCK_HELD, LIVENESS_DEAD);
	lockrules_conflict_keep(&best, &cand);
	CHECK(best.liveness == LIVENESS_DEAD && cand.state == LOCK_FREE,
	      "a dead holder is reported before a live one");
	entry(&cand, LOCK_CORRUPT, LIVENESS_UNKNOWN);
	lockrules_conflict_keep(&best, &cand);
	CHECK(best.state == LOCK_CORRUPT, "a corrupt lock is reported before a dead holder");
	entry(&cand, LOCK_RETAINED, LIVENESS_DEAD);
	lockrules_conflict_keep(&best, &cand);
	CHECK(best.state == LOCK_CORRUPT, "a retained lock does not displace a corrupt one");
	lock_entry_free(&best);

	entry(&best, LOCK_HELD, LIVENESS_LIVE);
	CHECK(lockrules_conflict_final("/w/a", &best, NULL, &err) == 0,
	      "waiting can cure a live holder");
	CHECK(lockrules_conflict_final("/w/a", &best, TOKEN, &err) != 0 && err.code == WSL_BUSY,
	      "never wait for the caller's own enclosing run");
	wsl_error_clear(&err);
	entry(&best, LOCK_HELD, LIVENESS_DEAD);
	CHECK(lockrules_conflict_final("/w/a/b", &best, NULL, &err) != 0 &&
	      err.code == WSL_RECOVERY_REQUIRED && strstr(err.message, "ancestor /w/a") != NULL,
	      "a dead holder of an ancestor needs recovery, and is named as the ancestor");
	wsl_error_clear(&err);
}

static void test_release_retain(void)
{
	struct wsl_error err = { 0 };
	struct lock_entry e;

	entry(&e, LOCK_HELD, LIVENESS_LIVE);
	CHECK(lockrules_check_release("/w/a", TOKEN, &e, &err) == 0, "the owner may release");
	CHECK(lockrules_check_release("/w/a", "ffffffffffffffffffffffffffffffff", &e, &err) != 0 &&
	      err.code == WSL_OWNERSHIP_LOST, "another token may not");
	wsl_error_clear(&err);
	CHECK(lockrules_check_retain("/w/a", TOKEN, &e, &err) == 0, "the owner may retain");
	entry(&e, LOCK_FREE, LIVENESS_LIVE);
	CHECK(lockrules_check_retain("/w/a", TOKEN, &e, &err) != 0 &&
	      err.code == WSL_OWNERSHIP_LOST, "a lock removed while held cannot be retained");
	wsl_error_clear(&err);
	entry(&e, LOCK_RETAINED, LIVENESS_DEAD);
	CHECK(lockrules_check_release("/w/a", TOKEN, &e, &err) != 0 &&
	      err.code == WSL_RECOVERY_REQUIRED, "a retained lock is not released, even by its owner");
	wsl_error_clear(&err);
}

/* The workspace's own lock, as both backends rank it. */
static void test_conflict_own(void)
{
	struct lock_entry best, cand;

	memset(&best, 0, sizeof(best));
	best.state = LOCK_FREE;
	entry(&cand, LOCK_FREE, LIVENESS_UNKNOWN);
	lockrules_conflict_keep_own(&best, &cand, "/w/own");
	CHECK(best.state == LOCK_FREE && cand.state == LOCK_FREE,
	      "a free own lock is no conflict");
	entry(&cand, LOCK_CORRUPT, LIVENESS_UNKNOWN);
	cand.workspace_root[0] = '\0';
	lockrules_conflict_keep_own(&best, &cand, "/w/own");
	CHECK(best.state == LOCK_CORRUPT && strcmp(best.workspace_root, "/w/own") == 0 &&
	      cand.state == LOCK_FREE,
	      "a corrupt own lock is kept, named by the wanted workspace");
	entry(&cand, LOCK_HELD, LIVENESS_LIVE);
	lockrules_conflict_keep_own(&best, &cand, "/w/own");
	CHECK(best.state == LOCK_CORRUPT && cand.state == LOCK_FREE,
	      "a live own lock does not displace a corrupt one");
	lock_entry_free(&best);
}

int main(void)
{
	test_reclaim_agrees();
	test_conflicts();
	test_conflict_own();
	test_release_retain();
	return tap_done();
}
