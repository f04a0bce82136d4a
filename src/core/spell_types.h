/*
 * The values spell_key's contract (spell.h) and its readers (spell_int.h)
 * both speak: the verdict and the slack a key may add.  It has no code of
 * its own so that the readers below spell.c can see them without including
 * spell.h, whose functions sit above them.
 */
#ifndef BLOOMGUARD_SPELL_TYPES_H
#define BLOOMGUARD_SPELL_TYPES_H

/* spell_key's answer (spell.h says what each means for a caller). */
enum spell_verdict {
    SPELL_KEY = 0,      /* out holds the key: the row exists iff a row has it */
    SPELL_NOT_A_VALUE,  /* no row can equal this input: deny */
    SPELL_MAYBE         /* absence cannot be proved: never deny */
};

/* What spell_key may add to the input's length (see spell_key_cap). */
#define SPELL_SLACK 32

#endif /* BLOOMGUARD_SPELL_TYPES_H */
