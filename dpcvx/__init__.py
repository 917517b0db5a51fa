"""dpcvx: differentially private convex optimization, declared in CVXPY, certified by dpcvx.

The public API is what this module exports; everything else is internal.
"""

from __future__ import annotations

from dpcvx import audit, domains, estimators, growth, losses, preprocessing
from dpcvx.accounting.ledger import Accountant, Ledger, PrivacyEvent, ZcdpAccountant
from dpcvx.arrays import ArraySource, MeanEstimate
from dpcvx.calculators import (
    ConvexFrameworkBound,
    ExtensionBias,
    ExtensionTradeoff,
    HeavyTailedClipping,
    HeavyTailedRate,
    HighProbabilityParameters,
    LocalizedDistanceBound,
    SmoothConvexBound,
    SmoothPerturbationBound,
    SmoothStronglyConvexBound,
    StronglyConvexFrameworkBound,
    StronglyConvexPopulationBound,
    extension_tradeoff,
    framework_convex_bound,
    framework_strongly_convex_bound,
    heavy_tailed_clipping,
    heavy_tailed_rate,
    high_probability_parameters,
    lipschitz_extension_bias,
    localized_distance_bound,
    paper_extension_parameter,
    smooth_convex_bound,
    smooth_perturbation_bound,
    smooth_strongly_convex_bound,
    smooth_strongly_convex_population_bound,
    smooth_tilted_bound,
    strongly_convex_population_bound,
)
from dpcvx.certification.certificate import CertifiedSolution, ReleaseCertificate
from dpcvx.certification.extension import ExtensionValues
from dpcvx.distributed import DaskProblem
from dpcvx.errors import (
    CertificationError,
    DataError,
    DpcvxError,
    InvalidParameterError,
    LipschitzClaimWarning,
    ModelingError,
    PrivacyBudgetError,
    PrivacyLeakWarning,
    SolverError,
)
from dpcvx.estimators import (
    PrivateLinearClassifier,
    PrivateQuantileRegressor,
    PrivateRidgeRegressor,
)
from dpcvx.mechanisms.approx_em import LocalizedApproximateExponentialMechanism
from dpcvx.mechanisms.clipped_gradient import ClippedGradientDescent
from dpcvx.mechanisms.deletion import (
    DeletionCalibration,
    crossover_items,
    deletion_calibration,
    deletion_sensitivity_bound,
    population_radius,
    required_users,
)
from dpcvx.mechanisms.double_output_perturbation import DoubleOutputPerturbation, OutputPertLocalize
from dpcvx.mechanisms.em_pgm import ProjectedGradientExponentialMechanism
from dpcvx.mechanisms.exponential import ExponentialMechanism, LocalizedExponentialMechanism
from dpcvx.mechanisms.inverse_sensitivity import (
    GradientInverseSensitivityNet,
    InverseSensitivityQuantile,
    gradient_inverse_sensitivity_net,
    inverse_sensitivity_median,
    inverse_sensitivity_quantile,
)
from dpcvx.mechanisms.iterative_localization import (
    GrowthAdaptiveLocalization,
    IterativeLocalization,
)
from dpcvx.mechanisms.localized_double import LocalizedDoubleOutputPerturbation, PopLocalizeEMPGM
from dpcvx.mechanisms.mean_estimation import CoordinatewiseMedianOfMeans, NoiseSmoothingMean
from dpcvx.mechanisms.output_perturbation import OutputPerturbation, choose_regularization
from dpcvx.mechanisms.output_perturbation_localize import OutputPerturbationLocalize
from dpcvx.mechanisms.phased_user import PhasedUserERM, PhasedUserSCO
from dpcvx.mechanisms.resampled_erm import ResampledERM
from dpcvx.mechanisms.selection import PrivateSelection
from dpcvx.mechanisms.strongly_convex_user import StronglyConvexUserERM, StronglyConvexUserSCO
from dpcvx.mechanisms.sufficient_statistics import SufficientStatisticsPerturbation
from dpcvx.mechanisms.tilted import TiltedOutputPerturbation
from dpcvx.neighbors import AddRemoveOne, NeighborRelation, ReplaceOne, ReplaceOneUser
from dpcvx.oracle import OracleProblem, structured_solve
from dpcvx.preprocessing import PrivateStandardScaler, PublicBoundsScaler
from dpcvx.problem import LipschitzExtension, Problem
from dpcvx.results import PrivateResult
from dpcvx.saddle_problem import SaddleProblem
from dpcvx.types import Guarantee, Sensitivity
from dpcvx.user_level import UserLevelProblem

__version__ = "0.1.0"

__all__ = [
    "Accountant",
    "AddRemoveOne",
    "DeletionCalibration",
    "ArraySource",
    "MeanEstimate",
    "NeighborRelation",
    "ReplaceOne",
    "ReplaceOneUser",
    "CertificationError",
    "ClippedGradientDescent",
    "CertifiedSolution",
    "CoordinatewiseMedianOfMeans",
    "DaskProblem",
    "DataError",
    "DoubleOutputPerturbation",
    "LocalizedDoubleOutputPerturbation",
    "LocalizedApproximateExponentialMechanism",
    "LocalizedExponentialMechanism",
    "OutputPerturbationLocalize",
    "PopLocalizeEMPGM",
    "ProjectedGradientExponentialMechanism",
    "DpcvxError",
    "ExponentialMechanism",
    "ExtensionValues",
    "Guarantee",
    "InvalidParameterError",
    "Ledger",
    "LipschitzExtension",
    "ModelingError",
    "NoiseSmoothingMean",
    "OracleProblem",
    "OutputPertLocalize",
    "OutputPerturbation",
    "PrivacyBudgetError",
    "PrivacyEvent",
    "LipschitzClaimWarning",
    "PrivacyLeakWarning",
    "PhasedUserERM",
    "PhasedUserSCO",
    "PrivateLinearClassifier",
    "PrivateQuantileRegressor",
    "PrivateResult",
    "PrivateRidgeRegressor",
    "Problem",
    "structured_solve",
    "ReleaseCertificate",
    "SaddleProblem",
    "StronglyConvexUserERM",
    "StronglyConvexUserSCO",
    "SufficientStatisticsPerturbation",
    "PrivateSelection",
    "TiltedOutputPerturbation",
    "UserLevelProblem",
    "ZcdpAccountant",
    "GrowthAdaptiveLocalization",
    "IterativeLocalization",
    "ResampledERM",
    "GradientInverseSensitivityNet",
    "InverseSensitivityQuantile",
    "gradient_inverse_sensitivity_net",
    "inverse_sensitivity_median",
    "inverse_sensitivity_quantile",
    "PrivateStandardScaler",
    "PublicBoundsScaler",
    "Sensitivity",
    "SolverError",
    "__version__",
    "audit",
    "choose_regularization",
    "crossover_items",
    "deletion_calibration",
    "deletion_sensitivity_bound",
    "population_radius",
    "required_users",
    "domains",
    "estimators",
    "growth",
    "losses",
    "preprocessing",
    "ConvexFrameworkBound",
    "ExtensionBias",
    "ExtensionTradeoff",
    "HeavyTailedClipping",
    "HeavyTailedRate",
    "HighProbabilityParameters",
    "LocalizedDistanceBound",
    "StronglyConvexFrameworkBound",
    "extension_tradeoff",
    "framework_convex_bound",
    "framework_strongly_convex_bound",
    "heavy_tailed_clipping",
    "heavy_tailed_rate",
    "high_probability_parameters",
    "lipschitz_extension_bias",
    "localized_distance_bound",
    "paper_extension_parameter",
    "SmoothConvexBound",
    "SmoothPerturbationBound",
    "SmoothStronglyConvexBound",
    "StronglyConvexPopulationBound",
    "smooth_convex_bound",
    "smooth_perturbation_bound",
    "smooth_strongly_convex_bound",
    "smooth_strongly_convex_population_bound",
    "smooth_tilted_bound",
    "strongly_convex_population_bound",
]
