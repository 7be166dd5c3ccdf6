// A fixture for the layering test: ir/ must not include passes/.
#pragma once
#include "passes/High.h"
