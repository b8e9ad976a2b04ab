/*
 * cmd.h - the commands, one file each (cmd_<name>.c), dispatched by main.c's
 * table. Each parses its options (opt.h) and runs its steps (command.h).
 */
#ifndef OEAP_CMD_H
#define OEAP_CMD_H

/* The commands (one file each). */
int cmd_apply(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_revert(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_definition(int argc, char **argv);
/* recordings: cmd_replay.c (recording.h, replay.h, recommend.h, replay_report.h) */
int cmd_replay(int argc, char **argv);
/* git integration: cmd_check.c, cmd_hook.c */
int cmd_check(int argc, char **argv);
int cmd_hook(int argc, char **argv);

#endif
