/*
 * patchdef_types.h - the data a patch definition is (patchdef.h loads it):
 * apart, so that the rooms that fill it while loading (manifest.h,
 * settingdef.h) sit below the loader without including it.
 */
#ifndef OEAP_PATCHDEF_TYPES_H
#define OEAP_PATCHDEF_TYPES_H

#include <stddef.h>

#include "query.h"

/* Where an anchor query runs: on the whole module, or on another anchor's node. */
#define OEAP_IN_MODULE "module"

typedef struct oeap_anchor_def {
	char *name;
	char *describe;   /* what the anchor is, in words, for messages */
	char *query_path; /* relative to the definition's directory */
	char *capture;    /* the capture that is the anchor node */
	char *in;         /* OEAP_IN_MODULE or an earlier anchor's name */
	int pick_last;    /* 0: exactly one match required; 1: the last match */
	oeap_query *query;
	char *contains_path; /* optional: a candidate counts only if this query */
	oeap_query *contains; /* matches (capture @match) somewhere inside it */
	char *unmatched;  /* optional: said at the end of the error when nothing matches (why, and
	                     what to do: e.g. the first upstream release the definition supports) */
} oeap_anchor_def;

typedef struct oeap_arg_def {
	char *keyword;    /* the keyword argument of the call site */
	char **exprs;     /* candidate expressions, first with a bound root name wins */
	size_t nexprs;
	int required;
} oeap_arg_def;

typedef struct oeap_region_def {
	char *name;
	char *after;      /* the anchor the region follows */
	char *template_path;
	char *template_text; /* LF line ends, 4-space indentation units */
	char *scope;      /* anchor (a function) whose bound names args may use, or NULL */
	oeap_arg_def *args;
	size_t nargs;
} oeap_region_def;

/* The type of a run-time setting's value (docs/patch-definitions.md, [setting:NAME]). */
typedef enum oeap_setting_type {
	OEAP_SETTING_INT = 0, /* decimal, 32-bit signed, within min..max */
	OEAP_SETTING_BOOL,    /* one of [binding] bool_true / bool_false, case-insensitive */
	OEAP_SETTING_STRING,  /* any value */
	OEAP_SETTING_PATH,    /* any value, a file name (shown as such) */
	OEAP_SETTING_CHOICE,  /* one of `values`, ASCII case-insensitive, taken as the listed spelling */
	OEAP_SETTING_OUTPUT,  /* any value, a file the binding writes: verify wants its folder writable */
} oeap_setting_type;

/*
 * One environment variable the binding reads at run time, and its rule. The
 * rules are data so that a new setting of the binding is a new section, not
 * new C code; `verify` checks the environment against them.
 */
typedef struct oeap_setting_def {
	char *name;       /* the environment variable */
	char *key;        /* the name the binding's settings use for it (the effective-settings line) */
	char *describe;   /* what it does, for messages */
	oeap_setting_type type;
	long long min, max; /* int: the allowed range (default: the 32-bit signed range) */
	char *at_least;   /* int: another int setting this one must not be below, or NULL */
	/* bool: "OTHER=VALUE": true whenever the choice setting OTHER takes VALUE, whatever this one's own
	 * value (shadow mode keeps the statistics); NULL: none */
	char *forced_by;
	char *range_reason; /* int: why min..max is what it is, said with a refused value, or NULL */
	char *default_value; /* as written in the environment; NULL: none (a path the binding records) */
	int is_switch;    /* 1: its zero/false value turns the binding off (at most one setting) */
	/* int: a value the binding takes but that may well do nothing from warn_from on (whether it does
	 * depends on what verify cannot see, e.g. the model): a warning saying `warn`. NULL: none. */
	long long warn_from;
	int has_warn_from;
	char *warn;
	char **values;    /* choice: the values it takes (NULL-terminated, at least one); else NULL */
	int bands;        /* int: also takes k0 bands (k0bands.h, "1-7:0,8-31:4,32-:3"), whose value is then their
	                     largest k0, each k0 within min..max */
} oeap_setting_def;

/* The largest [library] problem_size accepted (a struct far beyond any ABI's is a typo). */
#define OEAP_PROBLEM_SIZE_MAX 4096

/* One field of the argument block the binding hands oea_problem_check ([library] problem_probe). */
typedef struct oeap_probe_field {
	char *name;       /* a field of oea_problem (native/include/oea.h) */
	long long value;
} oeap_probe_field;

typedef struct oeap_patchdef {
	char *dir;
	char *name;       /* [a-z0-9-]+ */
	int version;      /* >= 1 */
	char *summary;
	char *framework;  /* optional: the framework's name for messages ("SGLang"); NULL: none stated */
	char *target;     /* path of the target file inside a checkout: the first of `targets` */
	char *installed_target; /* the same file inside site-packages (installed by pip), or NULL;
	                           its first component is the package --python looks for: the first
	                           of `installed_targets` */
	/* The alternatives, in order of preference (NULL-terminated, at least one): the target is
	 * the first that exists (in a folder, or in a revision's tree). An upstream that moved the
	 * code to another file between releases is one definition. `installed_targets` is NULL
	 * without installed_target; all of its paths share the first component (one package). */
	char **targets;
	char **installed_targets;
	int abi;          /* the liboea ABI version the binding expects */
	char *first_revision; /* optional: the first upstream revision the definition supports, a
	                         commit id (7-40 hex digits) or a date YYYY-MM-DD; `check`'s walk of
	                         the history stops there (NULL: the whole history) */
	char *binding_module; /* module name written beside the target (no .py) */
	char *binding_text;   /* its template: the [binding] source files concatenated */
	char *library_env;    /* environment variable overriding the library path */
	char *trust_escape;   /* optional: a bool [setting:] that lets paths failing the trust rule
	                         pass with a warning (trust.h), in verify and in the binding alike */
	char *env_prefix;     /* optional: every variable with this prefix is the binding's; one that
	                         is no [setting:] is reported (a typo means a setting silently dropped) */
	char **bool_true, **bool_false; /* the spellings of booleans (NULL-terminated), case-insensitive */
	/* [library]: the contract of liboea as the binding uses it, declared once
	 * (the binding is rendered with it and checks it at import; the library
	 * check of verify, status and apply checks the same). */
	char **library_symbols;  /* every entry point the binding calls (NULL-terminated) */
	int problem_size;        /* the struct_size of the binding's oea_problem */
	oeap_probe_field *problem_probe; /* the block it hands oea_problem_check (other fields 0) */
	size_t nprobe;
	oeap_setting_def *settings; /* in file order */
	size_t nsettings;
	oeap_anchor_def *anchors;
	size_t nanchors;
	oeap_region_def *regions;
	size_t nregions;
} oeap_patchdef;

#endif
