// PLACEHOLDER until checkpoints land.
#include "models/checkpoint.h"
