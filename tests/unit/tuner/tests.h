/* Tests defined in the other files of unit.tuner, run by test_tuner.c. */
#ifndef RAIL_TEST_TUNER_TESTS_H
#define RAIL_TEST_TUNER_TESTS_H

void p5en_table_reads_as_published(void);
void p5en_choices_within_2x_of_measured_crossovers(void);

#endif
