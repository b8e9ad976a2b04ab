#include "predicate.h"

#include <regex.h>
#include <stddef.h>
#include <string.h>

int oeap_predicate_eval(const char *what, int is_match, int negate, int left_set, const char *left, int right_set,
                        const char *right, oeap_error *err)
{
	if (!left_set || !right_set)
		return 1;
	if (!left || !right)
		return oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
	int holds;
	if (is_match) {
		regex_t re;
		if (regcomp(&re, right, REG_EXTENDED | REG_NOSUB))
			return oeap_fail(err, OEAP_ERR_DEFINITION, what, 0, "bad regular expression \"%s\"", right);
		holds = regexec(&re, left, 0, NULL, 0) == 0;
		regfree(&re);
	} else {
		holds = strcmp(left, right) == 0;
	}
	return negate ? !holds : holds;
}
