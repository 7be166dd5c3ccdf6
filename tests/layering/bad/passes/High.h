// A fixture for the layering test.
#pragma once
