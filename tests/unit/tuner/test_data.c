/* unit.tuner_data: the model against published measurements, a
 * calibration set (its constants were fitted on it) and a validation set
 * (never fitted on), each printing its agreement and regret. */
#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"

RAIL_TEST_MAIN(p5en_table_reads_as_published, p5en_choices_within_2x_of_measured_crossovers,
               regions_calibration_aws, points_calibration_set, regions_validation_aws,
               points_validation_set, points_vendor_tables, plan_validate_reports_every_set,
               every_set_at_or_ahead_of_nccl)
