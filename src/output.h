/* output.h - the only printer (src/output.c): JSON on stdout, the error
 * line on stderr and its JSON document, text tables. The core never
 * prints; commands, hold and child print through these. */
#ifndef WSLOCK_OUTPUT_H
#define WSLOCK_OUTPUT_H

#include <stddef.h>
#include <jansson.h>

#include "error.h"
#include "lockrules.h"
#include "registry.h"

/* State of one invocation, shared by every subcommand: filled by cli_parse
 * (cli.h), read here for how and whether to print. */
struct cli {
	const char *cmd;	/* subcommand name, for messages and hints */
	struct registry_config reg_cfg;	/* -d, --backend, --etcd-* */
	bool json_errors;	/* errors also go to stdout as JSON */
	bool pretty;
	bool quiet;
	int verbose;
};

/* Reports a usage error: one stderr line plus a hint to --help, the JSON
 * error on stdout when c->json_errors. Returns 64. */
int output_usage(struct cli *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Reports err (one stderr line "wslock: message", and for commands other
 * than run a JSON error object on stdout) and returns its exit status. */
int output_error(struct cli *c, struct wsl_error *err);

/* Writes value as JSON (compact, or indented with --pretty) and a newline
 * on stdout, then flushes; takes the reference. Returns 0, or 74 when stdout
 * cannot be written (EPIPE, ENOSPC...), after saying so on stderr. */
int output_json(struct cli *c, json_t *value);

/* Writes value as output_json does, saying nothing on a failure: returns
 * 0, or -1 with errno set when stdout cannot be written (the caller
 * reports it, e.g. through output_error with json_errors off). Takes the
 * reference. */
int output_json_write(struct cli *c, json_t *value);

/* A JSON document {"NAME":[ITEM,...]} written item by item, as
 * output_json would write it whole (the same bytes, compact or --pretty),
 * so that a long list needs no memory for all of it. output_stream_begin
 * writes the head, output_stream_item one item (taking the reference),
 * output_stream_end the tail, the newline and a flush. Each returns 0, or
 * 74 once stdout cannot be written (said once on stderr; later calls do
 * nothing and return 74 too). A list that stops half-way (its reader
 * failed) is left without its tail (output_stream_abort): never a shorter
 * list that parses. */
struct output_stream {
	struct cli *c;
	size_t n;	/* items written */
	int status;	/* 0, or 74 after a write error */
};
int output_stream_begin(struct cli *c, struct output_stream *s, const char *name);
int output_stream_item(struct output_stream *s, json_t *item);
int output_stream_end(struct output_stream *s);
/* Ends a list that stops half-way with a line break (no tail), so that
 * what follows (an error document) starts on a line of its own. */
void output_stream_abort(struct output_stream *s);

/* The JSON shape of a lock in inspect and error details (a new
 * reference). */
json_t *output_entry_json(const struct lock_entry *e);

/* One line of a text table: a lock and what to say under it (the liveness
 * reason when note is NULL). */
struct output_row {
	const struct lock_entry *e;
	const char *label;	/* shown instead of the workspace, or NULL */
	const char *note;
};

/* Prints rows on stdout as a table: workspace, state, liveness, holder
 * pid@host, age, purpose; each followed by indented lines: the reason, the
 * operation and the absolute time it was acquired, the retention reason,
 * and for a dead or unknown owner the command to run next (with the
 * registry options of c when it is not the default). */
int output_table(const struct cli *c, const struct output_row *rows, size_t n);

/* After the table of a free workspace: one line each for the n waiters q
 * queued for it (registry_queued): pid, mode, what it waits for and since
 * when, and that a run now waits behind them. 0, or the exit status of a
 * failed write (as output_json). */
int output_queued_text(const struct lock_entry *q, size_t n);

/* One row of output_table rendered ahead (inspect --all --format text:
 * the table's width comes from every row, so rows are kept, and a kept
 * row is its text, not its lock entry): its WORKSPACE cell and the rest,
 * both malloc(3)ed. output_text_row renders r (0, or -1 when out of
 * memory, t then empty); output_text_free frees t's strings. */
struct output_text {
	char *name;
	char *rest;
};
int output_text_row(const struct cli *c, const struct output_row *r, struct output_text *t);
void output_text_free(struct output_text *t);

/* Prints n rendered rows as output_table prints their rows, byte for
 * byte; 0, or the exit status of a failed write (as output_json). */
int output_text_table(const struct output_text *rows, size_t n);

/* inspect --journal --format text: list (the journal's lines as JSON
 * objects, oldest first) as a table on stdout, one line an entry: TIME,
 * ACTION, WORKSPACE, WHO (the actor: pid@host uid N) and REASON (why it
 * was allowed: the liveness reason, or "forced: " and --reason first),
 * every cell on one line (control characters escaped); an entry flagged
 * "invalid" (a line that is not one) is a row "- invalid - - line N is not
 * a journal entry (L bytes)". 0, or the exit status of a failed write (as
 * output_json). */
int output_journal_table(json_t *list);

/* For a corrupt lock e that recover clears (lockrules_corrupt_clearable,
 * and its workspace exists): the command line to copy into out (len
 * bytes), "cp OWNER.JSON corrupt-owner.json && wslock recover --force
 * --reason \"$REASON\" --expected-owner corrupt-owner.json WS" (with -d or
 * the etcd options as needed); pasted without setting REASON it changes
 * nothing. For one whose document does not say which workspace it locks
 * (lockrules_corrupt_bytes_clearable), WS is "$WORKSPACE", for the user to
 * set. Returns false, out untouched, when there is none. */
bool output_corrupt_next(const struct cli *c, const struct lock_entry *e,
			 char *out, size_t len);

/* Says something on stderr that is not an error report: "wslock: ", the
 * text and a newline, as given (no escaping: a notice names what the
 * caller passed, byte for byte). Safe in a forked child before exec as
 * far as stdio is. */
void output_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Writes a document (an owner document: --print-owner) and a newline on
 * stderr. */
void output_document(const char *doc);

/* Rewrites the terminal's current line on stderr: the wait's elapsed time
 * (ms, shown in s) and whom it waits for, cut to the terminal's width so
 * that it never wraps. */
void output_status_line(long long elapsed_ms, const char *subject, const char *who);

/* Clears the line output_status_line wrote. */
void output_status_clear(void);

#endif
