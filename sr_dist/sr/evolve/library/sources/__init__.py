"""The seed sources: one module each, every one a plain function of the sample (or of nothing).

============================  =================================================================
module                        what it proposes
============================  =================================================================
``power_law``                 the rounded power law; the power law times shapes of its messy
                              variables (one and two at a time)
``group_shapes``              the power law times a shape of one group of its messy variables
``transformed_sums``          a power-law part times the inverse transform of a sparse sum, a
                              Levy ratio or a ratio of sums of the rest
``ratios``                    ratios of sums ``(a0 + ...)/(s0 + ...)`` by one linear pursuit
``rational``                  sparse exact ratios of polynomials (Levy's linearised fit)
``pi_groups``                 with units: the prefactor times shapes, sums and ratios of the
                              Buckingham π groups
``decomposition``             separability, symmetries and recursion (AI Feynman's tests)
``data_free``                 monomials, products, ratios and sums with free constants
``curves``                    classic curves with constants inside their functions (logistic,
                              Gaussian, sinusoid, damped sinusoid, approach, saturation), up
                              to ``curve_max_variables`` variables
``pair_curves``               the same curves of a product or ratio of two variables
                              (``tanh(c*u*v)``, ``exp(-c*u/v)``), up to
                              ``pair_curve_max_variables`` variables
``sinusoid_products``         ``a*sin(b*u + c)*sin(d*v + e)`` for each pair of variables, with
                              an offset or linear terms, up to
                              ``sinusoid_product_max_variables`` variables
============================  =================================================================

A new heuristic arrives as a new module here (or a catalog entry in
:mod:`sr_dist.sr.evolve.library.shapes`), placed in the order by
:mod:`sr_dist.sr.evolve.library.assemble`; see docs/evolve.md, "Adding a seed source".
"""
